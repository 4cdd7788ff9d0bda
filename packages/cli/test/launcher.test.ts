/**
 * `pnpm cos-admin …` from a clone (README, "Operating it"): the root links scripts/cos-admin as its
 * `cos-admin` bin. It builds only when a package's sources are newer than its build (decided from
 * modification times, tested here on a scratch tree), and pnpm runs it as a binary: stdout holds
 * only the command's output (no script header: `--json` stays pure JSON), the exit status is the
 * command's, and a mistyped command gets pnpm's own error. The last three need the pnpm process:
 * two spawned runs.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { markBuilt, PACKAGES, staleness } from '../../../scripts/cos-admin/stale.mjs';
import { ROOT, childEnv, ensureBuilt, tempDir } from './support/cli.js';
import { serviceVersion } from '../src/version.js';

describe('pnpm cos-admin: the launcher', () => {
  describe('builds only when a source is newer than its build', () => {
    const tmp = tempDir('cos-launcher-');
    const root = tmp.dir;
    const at = (path: string, seconds: number): void => utimesSync(join(root, path), seconds, seconds);
    after(() => tmp.remove());

    before(() => {
      writeFileSync(join(root, 'tsconfig.base.json'), '{}');
      at('tsconfig.base.json', 1_000);
      for (const name of PACKAGES) {
        mkdirSync(join(root, 'packages', name, 'src', 'sub'), { recursive: true });
        for (const file of ['src/index.ts', 'src/sub/deep.ts', 'tsconfig.json', 'package.json', 'tsconfig.tsbuildinfo']) {
          writeFileSync(join(root, 'packages', name, file), '');
        }
        for (const path of ['src/sub/deep.ts', 'src/sub', 'src/index.ts', 'src', 'tsconfig.json', 'package.json']) at(`packages/${name}/${path}`, 1_000);
        at(`packages/${name}/tsconfig.tsbuildinfo`, 2_000);
      }
    });

    it('every build newer than its inputs: no build', () => {
      expect(staleness(root)).to.equal(null);
    });

    it('a source file deep in a package, a removed file (its directory changes), tsconfig.json or the shared base newer: that package (or the first) is rebuilt', () => {
      at('packages/store-sql/src/sub/deep.ts', 3_000);
      expect(staleness(root)).to.equal('packages/store-sql changed since its last build');
      at('packages/store-sql/src/sub/deep.ts', 1_000);
      at('packages/webhook-sender/src/sub', 3_000);
      expect(staleness(root)).to.equal('packages/webhook-sender changed since its last build');
      at('packages/webhook-sender/src/sub', 1_000);
      at('packages/cli/tsconfig.json', 3_000);
      expect(staleness(root)).to.equal('packages/cli changed since its last build');
      at('packages/cli/tsconfig.json', 1_000);
      at('tsconfig.base.json', 3_000);
      expect(staleness(root)).to.equal('packages/core changed since its last build');
      at('tsconfig.base.json', 1_000);
      expect(staleness(root)).to.equal(null);
    });

    it('a package.json newer than a build tsc finds up to date (it leaves the tsbuildinfo alone): current once the launcher marks the build', () => {
      at('packages/cli/package.json', 3_000);
      expect(staleness(root)).to.equal('packages/cli changed since its last build');
      markBuilt(root);
      expect(staleness(root)).to.equal(null);
    });

    it('a package never built: a build', () => {
      expect(staleness(join(root, 'nowhere'))).to.equal('not built yet');
    });
  });

  describe('through pnpm (spawned: pnpm itself is the subject)', function () {
    // pnpm's own start-up on a loaded machine: one run each.
    this.timeout(60_000);
    const tmp = tempDir('cos-launcher-run-');
    after(() => tmp.remove());
    before(() => ensureBuilt());

    /** pnpm as this run was started with it (npm_execpath), else the one on the PATH. */
    function pnpm(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
      const execPath = process.env['npm_execpath'];
      const [file, argv] = execPath !== undefined && /pnpm/.test(execPath) ? [process.execPath, [execPath, ...args]] : ['pnpm', args];
      return new Promise((resolve) => {
        execFile(file, argv, { cwd: ROOT, env: childEnv({ DATABASE_URL: `sqlite:${join(tmp.dir, 'none.sqlite')}` }) }, (error, stdout, stderr) =>
          resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr }),
        );
      });
    }

    it('stdout is the command\'s own (no pnpm header), and its exit status and one-line --json error pass through', async () => {
      const version = await pnpm(['cos-admin', '--version']);
      expect(version.code, version.stderr).to.equal(0);
      expect(version.stdout).to.equal(`${serviceVersion()}\n`);
      // A command that fails: exit 1 and the {"error","message"} line, nothing else on stdout or stderr.
      const failed = await pnpm(['cos-admin', 'org', 'list', '--json']);
      expect(failed.code).to.equal(1);
      expect(failed.stdout).to.equal('');
      expect(JSON.parse(failed.stderr)).to.include({ error: 'DATABASE_NOT_FOUND' });
    });

    it('a mistyped command gets pnpm\'s own error, not silence', async () => {
      const typo = await pnpm(['cos-admni', 'org', 'list']);
      expect(typo.code).to.not.equal(0);
      expect(typo.stdout + typo.stderr).to.match(/Command "cos-admni" not found/);
    });
  });
});
