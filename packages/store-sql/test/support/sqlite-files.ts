/**
 * Scratch SQLite files for one describe block: a temp directory made before its tests and removed
 * after them, and stores opened on files in it that are closed after each test.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqlStore, type SqlStore } from '@cos/store-sql';

export interface SqliteFiles {
  /** A path in the scratch directory (valid inside tests and hooks). */
  file(name: string): string;
  /** A store on `url`, closed after the current test. */
  storeOn(url: string): SqlStore;
}

/** Call at the top of a describe block: registers its before/afterEach/after hooks. */
export function useSqliteFiles(prefix: string): SqliteFiles {
  let dir: string | undefined;
  const open: SqlStore[] = [];
  before(() => {
    dir = mkdtempSync(join(tmpdir(), prefix));
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });
  after(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });
  return {
    file(name) {
      if (dir === undefined) throw new Error('useSqliteFiles: the scratch directory exists only while the block runs');
      return join(dir, name);
    },
    storeOn(url) {
      const store = createSqlStore({ databaseUrl: url });
      open.push(store);
      return store;
    },
  };
}
