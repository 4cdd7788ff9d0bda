/**
 * The README's quickstart, to the letter: a fresh clone of the committed tree, the README's own
 * install-and-start command run by bash in it, then the README's curl block run by bash against that
 * server (its two `export` lines pointed at the running instance and the printed platform key). So the
 * README cannot drift from what works. The start command listens on PORT=0 here (the README's default
 * is 3000, which a test machine may have taken); nothing else is changed.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { ROOT, childEnv, jsonLines, printedKeys, tempDir } from './support/cli.js';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const run = promisify(execFile);

/** The fenced ```sh blocks of the README, in order. */
function shellBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] as string);
}

function has(command: string): boolean {
  try {
    execFileSync(command, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const CAN_RUN = existsSync(join(ROOT, '.git')) && has('git') && has('curl');
const blocks = shellBlocks(README);
const startCommand = blocks.find((b) => b.includes('pnpm@10 start'))?.trim();
const testCommand = blocks.find((b) => b.includes('pnpm@10 test'))?.trim();
const curlBlock = blocks.find((b) => b.includes('export BASE='));
const selfServiceBlock = blocks.find((b) => b.includes('webhook-endpoint/ping'));
const planBlock = blocks.find((b) => b.includes('/rate-limit'));
const cosAdminBlock = blocks.find((b) => b.includes('cos-admin org list'));

/** Markdown without HTML comments and without the bench's generated figures. */
function prose(markdown: string): string {
  return markdown.replace(/<!-- bench:begin[\s\S]*?<!-- bench:end[^>]*-->/g, '').replace(/<!--[\s\S]*?-->/g, '');
}

/**
 * Commands that need pnpm on the PATH: a line of a ```sh block, or an inline `code` span, that
 * starts with `pnpm ` (the docs must work with only Node and npm; `npx -y pnpm@10 …`).
 */
function barePnpmCommands(markdown: string): string[] {
  const text = prose(markdown);
  const lines = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => (m[1] as string).split('\n'));
  const spans = [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1] as string);
  return [...lines, ...spans].map((l) => l.trim()).filter((l) => /^(\S+=\S+ )*pnpm /.test(l));
}

/** A directory holding only node, npm and npx (and the shell tools every machine has), for PATH. */
function nodeAndNpmOnly(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const which = (c: string): string => execFileSync('bash', ['-c', `command -v ${c}`], { encoding: 'utf8' }).trim();
  // Node and npm, and the base POSIX tools any such machine has: the shims pnpm writes into
  // node_modules/.bin run under sh with dirname, sed and uname (without sed the Node 22 CI run failed).
  for (const tool of ['node', 'npm', 'npx', 'bash', 'sh', 'env', 'cat', 'ls', 'mkdir', 'rm', 'dirname', 'uname', 'sed']) {
    symlinkSync(which(tool), join(dir, tool));
  }
  return dir;
}

describe('README quickstart from a fresh clone', function () {
  this.timeout(240_000);

  it('has the two set-up commands: one installs and starts the server, one installs and runs the tests', () => {
    expect(startCommand, 'install-and-start command').to.match(/^npx -y pnpm@10 install\b.*&& npx -y pnpm@10 start$/);
    expect(testCommand, 'install-and-test command').to.match(/^npx -y pnpm@10 install\b.*&& npx -y pnpm@10 test$/);
    const ci = readFileSync(join(ROOT, '.ci/run'), 'utf8');
    expect(ci, '.ci/run runs the README test command').to.match(/\$PNPM install\b/).and.to.match(/\$PNPM test\b/);
  });

  it('README, operations.md and performance.md need only Node and npm: no command starts with a bare `pnpm`', () => {
    for (const doc of ['README.md', 'docs/operations.md', 'docs/performance.md']) {
      expect(barePnpmCommands(readFileSync(join(ROOT, doc), 'utf8')), doc).to.deep.equal([]);
    }
    expect(cosAdminBlock, 'the README block of cos-admin commands').to.be.a('string');
    for (const line of (cosAdminBlock as string).trim().split('\n')) expect(line).to.match(/^node_modules\/\.bin\/cos-admin /);
  });

  (CAN_RUN || process.env['CI'] === 'true' ? describe : describe.skip)('the start command and the curl flow, run by bash', () => {
    const tmp = tempDir('cos-readme-');
    const clone = join(tmp.dir, 'clone');
    let server: ChildProcess | undefined;
    let out = '';
    let base = '';
    let platformKey = '';

    before(async function () {
      execFileSync('git', ['clone', '--quiet', ROOT, clone]);
      server = spawn('bash', ['-c', startCommand as string], {
        cwd: clone,
        env: childEnv({ PORT: '0' }),
        detached: true, // its own process group: bash -> npx -> pnpm -> node
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      server.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      server.stderr?.on('data', (d: Buffer) => (out += d.toString()));
      const deadline = Date.now() + 200_000;
      while (Date.now() < deadline) {
        const line = jsonLines(out).find((l) => typeof l['address'] === 'string' && typeof l['port'] === 'number');
        if (line !== undefined) {
          base = `${line['address'] as string}/v1`;
          break;
        }
        if (server.exitCode !== null) throw new Error(`the start command exited early:\n${out}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      if (base === '') throw new Error(`the server did not start:\n${out}`);
    });

    after(async () => {
      if (server?.pid !== undefined && server.exitCode === null) {
        const exited = new Promise((r) => server?.once('exit', r));
        process.kill(-server.pid, 'SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 12_000))]);
        if (server.exitCode === null) process.kill(-server.pid, 'SIGKILL');
      }
      tmp.remove();
    });

    it('the first start prints the platform key once and says to store it', () => {
      const keys = printedKeys(out);
      expect(keys).to.have.length(1);
      platformKey = keys[0] as string;
      expect(out).to.match(/Store this key now/);
    });

    it("the README's curl blocks run as written: list, create, issue, use, patch; the self-service block (before the revocation, as it says); the plan set by the platform key; revoke (204), then 401", () => {
      const filled = (curlBlock as string)
        .replace(/^export BASE=.*$/m, `export BASE=${base}`)
        .replace(/^export PLATFORM_KEY=.*$/m, `export PLATFORM_KEY=${platformKey}`);
      expect(filled).to.include(`export BASE=${base}`).and.to.include(`export PLATFORM_KEY=${platformKey}`);
      // C-163: the self-service block uses $KEY and $ORG_ID of the first block, before its revocation.
      const revoke = filled.indexOf('# Revoke it');
      expect(revoke, 'the first block revokes its key under "# Revoke it"').to.be.greaterThan(0);
      expect(selfServiceBlock, 'the self-service block').to.be.a('string');
      expect(planBlock, 'the plan block').to.be.a('string');
      const SELF = '=== self-service ===';
      const PLAN = '=== plan ===';
      const REST = '=== revocation ===';
      const script = [
        filled.slice(0, revoke),
        `echo '${SELF}'`,
        selfServiceBlock as string,
        `echo '${PLAN}'`,
        planBlock as string,
        `echo '${REST}'`,
        filled.slice(revoke),
      ].join('\n');
      const whole = execFileSync('bash', ['-euo', 'pipefail', '-c', script], { cwd: clone, encoding: 'utf8' });
      const [first, selfService, plan, rest] = whole.split(new RegExp(`^(?:${SELF}|${PLAN}|${REST})\n`, 'm')) as [string, string, string, string];
      const [planSet, keyLimit] = plan.trim().split('\n') as [string, string];
      expect(JSON.parse(planSet), 'the plan set by the platform key').to.deep.equal({ requests_per_minute: 600, source: 'organisation' });
      expect(JSON.parse(keyLimit), "the key's own limit").to.include({ rate_limit_per_minute: 100 });
      const self = selfService.trim().split('\n');
      expect(JSON.parse(self[0] as string)).to.have.nested.property('organisation.id'); // /me
      expect(JSON.parse(self[1] as string)).to.deep.include({ label: 'ci pipeline (main)', metadata: { owner: 'team-payments' }, allowed_cidrs: null }); // PATCH of the key
      expect(self.some((l) => /^HTTP\/1\.1 201 /.test(l)), 'the issuance with an Idempotency-Key: 201').to.equal(true);
      const [deliveries, redelivered, removed] = self.slice(-3) as [string, string, string];
      const { notification_id: again } = JSON.parse(redelivered) as { notification_id: string };
      expect(again, 'the redelivery answered 202 with the delivery').to.match(/^[0-9a-f-]{36}$/);
      const deliveryList = (JSON.parse(deliveries) as { data: { id: string; event_type: string }[] }).data;
      expect(deliveryList.find((d) => d.id === again), 'the ping delivery, redelivered').to.include({ event_type: 'ping' });
      expect(removed).to.equal('204');
      const output = `${first}${rest}`;
      const lines = output.trim().split('\n');
      expect(JSON.parse(lines[0] as string)).to.include({ status: 'ok' }); // health
      expect(JSON.parse(lines[1] as string)).to.include({ api_version: 'v1', release: 'v1-stable' }); // version
      const listed = JSON.parse(lines[2] as string) as { data: { slug: string; is_system: boolean }[] };
      expect(listed.data.map((o) => o.slug)).to.deep.equal(['platform']);
      expect(JSON.parse(lines[3] as string)).to.include({ slug: 'acme', name: 'Acme Ltd' }); // GET with the new key
      expect(JSON.parse(lines[4] as string)).to.include({ slug: 'acme', name: 'Acme Limited' }); // PATCH
      expect(lines[5]).to.equal('204');
      expect(JSON.parse(lines[6] as string)).to.deep.equal({
        error: 'UNAUTHORIZED',
        message: 'Missing or invalid API key',
        details: [],
      });
      expect(output).not.to.include(platformKey);
    });

    // One test per command, each run exactly as written (its own process, as in the README), so a
    // failure names its line and no test holds every command's start against one timeout.
    describe("the README's cos-admin commands run as written with only node, npm and npx on the PATH", () => {
      const runnable = (cosAdminBlock ?? '')
        .trim()
        .split('\n')
        .map((l) => l.replace(/\s+#.*$/, '').trim())
        .filter((l) => l !== '' && !l.includes('<') && !l.includes('https://'));
      const PREFIX = 'node_modules/.bin/cos-admin ';
      /** What a command's output must show, beyond its exit status 0. */
      const shows: Record<string, RegExp | string> = {
        [`${PREFIX}org list`]: /\nplatform|  platform  /, // the bootstrap's organisation
        [`${PREFIX}org create --name "Globex" --slug globex`]: 'Created organisation:',
        [`${PREFIX}--help`]: 'Usage: cos-admin [options] [command]',
      };
      let PATH = '';

      before(function () {
        PATH = nodeAndNpmOnly(join(tmp.dir, 'node-and-npm-only'));
        expect(() => execFileSync('bash', ['-c', 'command -v pnpm'], { env: { PATH } }), 'pnpm is not on that PATH').to.throw();
      });

      it('the runnable lines include org list, org create and --help', () => {
        expect(runnable).to.include.members(Object.keys(shows));
      });

      it('every line starts with the same `node_modules/.bin/cos-admin`, the launcher the install links', () => {
        for (const line of runnable) expect(line.startsWith(PREFIX), line).to.equal(true);
      });

      for (const line of runnable) {
        it(line, async function () {
          this.timeout(60_000);
          const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', line], { cwd: clone, env: { ...childEnv({}), PATH }, encoding: 'utf8' });
          const expected = shows[line];
          if (typeof expected === 'string') expect(stdout).to.include(expected);
          else if (expected !== undefined) expect(stdout).to.match(expected);
        });
      }
    });
  });
});
