/**
 * An operator command on an embedded SQLite file loads no file of pg: the Postgres driver is loaded
 * when a Postgres store is made, so a SQLite deployment's commands start without it (and without
 * Node's fetch, which pg loads as it starts).
 */
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { childEnv, ensureBuilt, MAIN_DIST, tempDir } from './support/cli.js';

const RECORD_LOADS = fileURLToPath(new URL('./fixtures/record-loads.mjs', import.meta.url));
const RECORD_REQUIRES = fileURLToPath(new URL('./fixtures/record-requires.cjs', import.meta.url));
/** A file of pg, or of a package only pg brings (knex's own directory is named after its peers, pg among them: not matched). */
const PG_FILE = /\/node_modules\/(pg|pg-pool|pg-protocol|pg-types|pgpass|pg-int8|postgres-[a-z]+)\//;

function run(args: readonly string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--require', RECORD_REQUIRES, '--import', RECORD_LOADS, MAIN_DIST, ...args], { cwd, env }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr }),
    );
  });
}

describe('an operator command on SQLite', () => {
  const tmp = tempDir('cos-sqlite-loads-');
  after(() => tmp.remove());
  before(() => ensureBuilt());

  it('migrates and lists organisations without loading any file of pg', async () => {
    const loads = join(tmp.dir, 'loads.txt');
    const requires = join(tmp.dir, 'requires.txt');
    const env = childEnv({ DATABASE_URL: `sqlite:${join(tmp.dir, 'cos.sqlite')}`, COS_RECORD_LOADS: loads, COS_RECORD_REQUIRES: requires });
    for (const args of [['migrate', '--json'], ['org', 'list', '--json']]) {
      writeFileSync(loads, '');
      writeFileSync(requires, '');
      const result = await run(args, env, tmp.dir);
      expect(result.code, result.stderr).to.equal(0);
      const esm = readFileSync(loads, 'utf8').trim().split('\n');
      const cjs = readFileSync(requires, 'utf8').trim().split('\n');
      // The recorders saw the command's modules: the SQLite driver among them.
      expect(cjs.some((p) => p.includes('/node_modules/better-sqlite3/')), args.join(' ')).to.equal(true);
      expect(esm.filter((u) => PG_FILE.test(u)), args.join(' ')).to.deep.equal([]);
      expect(cjs.filter((p) => PG_FILE.test(p)), args.join(' ')).to.deep.equal([]);
    }
  });
});
