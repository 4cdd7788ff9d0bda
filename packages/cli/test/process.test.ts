/**
 * `cos-admin` at the process boundary, and runs in process side by side. The child process (the
 * built bin) shows what only a process shows: its exit status (0 success, 1 failure, 2 wrong
 * command line), that a failure is one line on the real stderr with nothing on stdout, that with
 * --json all of stdout is the JSON, the `--` pnpm passes through, and the `.env` and relative
 * SQLite path of its working directory. In process (src/run.ts, what the other command tests
 * use): each run has its own environment, working directory, output, actor and exit status, and
 * leaves nothing behind in process.env or console.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { userInfo } from 'node:os';
import { expect } from 'chai';
import { cliJson, ensureBuilt, runCli, spawnCli, tempDir } from './support/cli.js';

describe('cos-admin as a process (Operator interface)', function () {
  this.timeout(60_000);
  const tmp = tempDir();
  const env = { DATABASE_URL: 'sqlite:./data/cos.sqlite' };

  before(async function () {
    this.timeout(180_000);
    await ensureBuilt();
  });
  after(() => tmp.remove());

  it('exit status 0, and with --json all of stdout is the JSON; a relative SQLite path is under the working directory', async () => {
    const r = await spawnCli(['migrate', '--json'], env, tmp.dir);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stderr).to.equal('');
    expect(JSON.parse(r.stdout).applied).to.include('0001_initial');
    expect(existsSync(join(tmp.dir, 'data', 'cos.sqlite'))).to.equal(true);
  });

  it('exit status 1 for a failure: one line on stderr (with --json: {"error", "message"}), nothing on stdout', async () => {
    const human = await spawnCli(['key', 'list', 'c1000000-0000-4000-8000-000000000000'], env, tmp.dir);
    expect(human).to.deep.equal({ code: 1, stdout: '', stderr: 'cos-admin: Organisation not found\n' });
    const json = await spawnCli(['key', 'list', 'c1000000-0000-4000-8000-000000000000', '--json'], env, tmp.dir);
    expect(json).to.deep.equal({ code: 1, stdout: '', stderr: '{"error":"NOT_FOUND","message":"Organisation not found"}\n' });
  });

  it('exit status 2 for a wrong command line, also behind the `--` that `pnpm cos-admin -- …` passes; --help exits 0 on stdout', async () => {
    const usage = await spawnCli(['--', 'org', 'list', '--bogus', '--json'], env, tmp.dir);
    expect(usage).to.deep.equal({ code: 2, stdout: '', stderr: '{"error":"USAGE_ERROR","message":"unknown option \'--bogus\'"}\n' });
    const group = await spawnCli(['org'], env, tmp.dir);
    expect(group.code).to.equal(2);
    expect(group.stdout).to.equal('');
    expect(group.stderr).to.match(/^Usage: cos-admin org /);
    const help = await spawnCli(['--', 'org', '--help'], env, tmp.dir);
    expect(help.code).to.equal(0);
    expect(help.stdout).to.match(/^Usage: cos-admin org /);
    expect(help.stderr).to.equal('');
  });

  it('reads the .env of its working directory; variables already set win', async () => {
    const dir = tempDir();
    try {
      writeFileSync(join(dir.dir, '.env'), 'DATABASE_URL=sqlite:./from-dotenv.sqlite\nPORT=not-a-port\n');
      const bad = await spawnCli(['org', 'list'], {}, dir.dir);
      expect(bad.code).to.equal(1);
      expect(bad.stderr).to.match(/^cos-admin: invalid configuration: PORT must be an integer .*\.env line 2\)\n$/);
      const ok = await spawnCli(['migrate', '--json'], { PORT: '3001' }, dir.dir);
      expect(ok.code, ok.stderr).to.equal(0);
      expect(existsSync(join(dir.dir, 'from-dotenv.sqlite'))).to.equal(true);
    } finally {
      dir.remove();
    }
  });
});

describe('cos-admin run in process (runCli)', function () {
  this.timeout(20_000);

  it('runs side by side, each with its own environment, working directory, output and actor', async () => {
    const a = tempDir();
    const b = tempDir();
    try {
      const envA = { DATABASE_URL: 'sqlite:./a.sqlite' };
      const envB = { DATABASE_URL: 'sqlite:./b.sqlite' };
      await Promise.all([cliJson(['migrate'], envA, a.dir), cliJson(['migrate'], envB, b.dir)]);
      const [orgA, orgB] = await Promise.all([
        cliJson(['org', 'create', '--name', 'A', '--slug', 'a', '--actor', 'alice'], envA, a.dir),
        cliJson(['org', 'create', '--name', 'B', '--slug', 'b'], envB, b.dir),
      ]);
      const [listA, listB, failure] = await Promise.all([
        cliJson(['org', 'list'], envA, a.dir),
        cliJson(['org', 'list'], envB, b.dir),
        runCli(['org', 'list', '--limit', '0'], envA, a.dir),
      ]);
      expect(listA.data).to.deep.equal([orgA]);
      expect(listB.data).to.deep.equal([orgB]);
      expect(failure).to.deep.equal({ code: 2, stdout: '', stderr: "cos-admin: option '--limit <n>' argument '0' is invalid. Use a whole number from 1 to 100.\n" });
      const [auditA, auditB] = await Promise.all([cliJson(['audit', 'list'], envA, a.dir), cliJson(['audit', 'list'], envB, b.dir)]);
      expect(auditA.data.map((e: any) => e.actor)).to.deep.equal([{ type: 'operator', name: 'alice' }]);
      expect(auditB.data.map((e: any) => e.actor), '--actor of another run is not this one').to.deep.equal([{ type: 'operator', name: userInfo().username }]);
    } finally {
      a.remove();
      b.remove();
    }
  });

  it('reads nothing from process.env and leaves it and console.* as they were; a .env is read into the run alone', async () => {
    const dir = tempDir();
    const consoleBefore = [console.log, console.info, console.debug, console.warn, console.error];
    const envBefore = { ...process.env };
    try {
      writeFileSync(join(dir.dir, '.env'), 'DATABASE_URL=sqlite:./dotenv.sqlite\nMAX_ACTIVE_KEYS_PER_ORG=1\n');
      await cliJson(['migrate'], {}, dir.dir);
      expect(existsSync(join(dir.dir, 'dotenv.sqlite'))).to.equal(true);
      const org = await cliJson<{ id: string }>(['org', 'create', '--name', 'Capped', '--slug', 'capped'], { LOG_LEVEL: 'debug' }, dir.dir);
      await cliJson(['key', 'issue', org.id, '--label', 'one'], {}, dir.dir);
      const second = await runCli(['key', 'issue', org.id, '--label', 'two'], {}, dir.dir);
      expect(second.code, 'MAX_ACTIVE_KEYS_PER_ORG from the .env').to.equal(1);
      expect(process.env).to.deep.equal(envBefore);
      expect([console.log, console.info, console.debug, console.warn, console.error]).to.deep.equal(consoleBefore);
      // A run without a database in its environment or .env gets the default, whatever process.env says.
      const none = await runCli(['org', 'list'], { DATABASE_URL: 'sqlite:./none.sqlite' }, dir.dir);
      expect(none.stderr).to.include(`no SQLite database at ${join(dir.dir, 'none.sqlite')}`);
    } finally {
      dir.remove();
    }
  });

  it('refuses `serve`, which needs a process of its own (signal handlers, exit)', async () => {
    const r = await runCli(['serve'], { DATABASE_URL: 'sqlite::memory:' }, process.cwd());
    expect(r).to.deep.equal({ code: 1, stdout: '', stderr: 'cos-admin: serve runs in a process of its own: start `cos-admin serve` as a command\n' });
  });
});
