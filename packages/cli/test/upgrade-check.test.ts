/**
 * The rolling-upgrade check in CI: the previous release (the commit in release/previous) serves on a
 * Postgres database this checkout has migrated (scripts/upgrade-check.mjs: issue, authenticate,
 * revoke, rate limit, audit verify). About 40 s here: REF's install from pnpm's store and its build
 * are most of it.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { ensureBuilt, ROOT } from './support/cli.js';
import { databaseTargets, type TestDatabase } from './support/databases.js';

const exec = promisify(execFile);
const previous = readFileSync(join(ROOT, 'release', 'previous'), 'utf8').trim();

describe('C-187: the previous release serves on the schema this checkout migrates (scripts/upgrade-check.mjs)', function () {
  this.timeout(60_000);

  it('release/previous names a commit of this history that released the version of its CHANGELOGs', async () => {
    expect(previous).to.match(/^[0-9a-f]{40}$/);
    await exec('git', ['merge-base', '--is-ancestor', previous, 'HEAD'], { cwd: ROOT });
    const { stdout } = await exec('git', ['show', `${previous}:packages/cli/package.json`], { cwd: ROOT });
    const version = (JSON.parse(stdout) as { version: string }).version;
    const { stdout: changelog } = await exec('git', ['show', `${previous}:packages/cli/CHANGELOG.md`], { cwd: ROOT });
    expect(/^## (\S+)$/m.exec(changelog)?.[1]).to.equal(version);
  });

  const postgres = databaseTargets().find((t) => t.name === 'Postgres');
  (postgres === undefined ? describe.skip : describe)('on Postgres', () => {
    let db: TestDatabase | undefined;
    before(async () => {
      db = await postgres!.create();
    });
    after(async () => {
      await db?.drop();
    });

    it('issue, authenticate, revoke (401 at once), rate limit (429) and audit verify pass with the previous release serving', async function () {
      this.timeout(600_000);
      await ensureBuilt(); // this checkout's build, under the lock the other CLI tests share
      const { stdout } = await exec(process.execPath, [join(ROOT, 'scripts', 'upgrade-check.mjs'), previous, db!.databaseUrl], { cwd: ROOT, timeout: 590_000, maxBuffer: 8 * 1024 * 1024 });
      expect(stdout).to.match(/the previous release serves on the migrated schema/);
      expect(stdout).to.match(/issue, authenticate, revoke \(401 at once\) and rate limit \(429\) on the previous release/);
      expect(stdout).to.match(/audit verify accepts what the previous release wrote \(\d+ organisations, status ok\)/);
      const seconds = /passed \(([\d.]+) s\)/.exec(stdout)?.[1];
      expect(seconds).to.be.a('string');
      console.log(`      (upgrade check: ${seconds} s)`);
    });
  });
});
