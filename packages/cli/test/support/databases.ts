/**
 * The databases the CLI runs against: a temp SQLite file (always) and Postgres when
 * TEST_DATABASE_URL is set, in a freshly created database `cos_cli_<random>` dropped afterwards.
 * Under CI=true a missing TEST_DATABASE_URL fails loudly instead of skipping.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createSqlStore } from '@cos/store-sql';
import { tempDir } from './cli.js';

export interface TestDatabase {
  readonly databaseUrl: string;
  /** Working directory for the child processes. */
  readonly cwd: string;
  drop(): Promise<void>;
}

export interface DatabaseTarget {
  readonly name: 'SQLite' | 'Postgres';
  create(): Promise<TestDatabase>;
}

const sqlite: DatabaseTarget = {
  name: 'SQLite',
  async create() {
    const tmp = tempDir();
    return { databaseUrl: `sqlite:${join(tmp.dir, 'data', 'cos.sqlite')}`, cwd: tmp.dir, drop: async () => tmp.remove() };
  },
};

function postgres(adminUrl: string): DatabaseTarget {
  return {
    name: 'Postgres',
    async create() {
      const name = `cos_cli_${randomBytes(6).toString('hex')}`;
      const admin = createSqlStore({ databaseUrl: adminUrl, poolMax: 1, statementTimeoutMs: 60_000 });
      try {
        await admin.knex.raw(`CREATE DATABASE ${name}`);
      } finally {
        await admin.close();
      }
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      const tmp = tempDir();
      return {
        databaseUrl: url.toString(),
        cwd: tmp.dir,
        async drop() {
          tmp.remove();
          const a = createSqlStore({ databaseUrl: adminUrl, poolMax: 1, statementTimeoutMs: 60_000 });
          try {
            await a.knex.raw(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
          } finally {
            await a.close();
          }
        },
      };
    },
  };
}

const missingPostgres: DatabaseTarget = {
  name: 'Postgres',
  create() {
    return Promise.reject(new Error('CI=true but TEST_DATABASE_URL is not set: the Postgres suites must run in CI'));
  },
};

/** SQLite always; Postgres when TEST_DATABASE_URL is set (and required under CI=true). */
export function databaseTargets(): DatabaseTarget[] {
  const url = process.env['TEST_DATABASE_URL'];
  if (url !== undefined && url !== '') return [sqlite, postgres(url)];
  if (process.env['CI'] === 'true') return [sqlite, missingPostgres];
  return [sqlite];
}
