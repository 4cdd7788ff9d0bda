/**
 * The databases the CLI runs against: a temp SQLite file (always) and Postgres when
 * TEST_DATABASE_URL is set, in a freshly created database `cos_cli_<random>` dropped afterwards.
 * Under CI=true a missing TEST_DATABASE_URL fails loudly instead of skipping.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createSqlStore } from '@cos/store-sql';
import { cliJson, runCli, startServe, tempDir, type CliResult, type Env, type ServeProcess } from './cli.js';

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

/** A new Postgres database (the Postgres target's), for suites that run only on Postgres; throws without TEST_DATABASE_URL. */
export async function postgresDatabase(): Promise<TestDatabase> {
  const target = databaseTargets().find((t) => t.name === 'Postgres');
  if (target === undefined) throw new Error('TEST_DATABASE_URL is set but no Postgres target');
  return target.create();
}

/** A suite's own database, its environment and `cos-admin` run in process against it. */
export interface SuiteDatabase {
  /** The database (set by the suite's first `before` hook). */
  readonly db: TestDatabase;
  /** DATABASE_URL of `db` plus the suite's extra variables. */
  readonly env: Env;
  /** Runs one command in `db.cwd` with `env`. */
  cli(...args: string[]): Promise<CliResult>;
  /** Runs a command that must succeed with --json and returns its parsed stdout. */
  json<T = any>(...args: string[]): Promise<T>;
  /** Starts `cos-admin serve` as a child process with `env` plus `extra`; killed after each test. */
  serve(args: string[], extra?: Env): ServeProcess;
}

/**
 * Registers, in the calling `describe`, a `before` hook that creates a database of the suite's own
 * on `target` (hooks the suite registers later run after it: migrate there), an `afterEach` hook
 * that kills the `serve` processes the test left running, and an `after` hook that drops the
 * database. `extraEnv` joins DATABASE_URL in the environment of every command.
 */
export function suiteDatabase(target: DatabaseTarget, extraEnv: Env = {}): SuiteDatabase {
  let db: TestDatabase | undefined;
  let env: Env = {};
  const current = (): TestDatabase => {
    if (db === undefined) throw new Error(`the ${target.name} database of this suite is created in its before hook`);
    return db;
  };
  const servers: ServeProcess[] = [];
  before(async () => {
    db = await target.create();
    env = { DATABASE_URL: db.databaseUrl, ...extraEnv };
  });
  afterEach(() => {
    for (const s of servers.splice(0)) s.kill();
  });
  after(async () => {
    await db?.drop();
  });
  return {
    get db() {
      return current();
    },
    get env() {
      return env;
    },
    cli: (...args) => runCli(args, env, current().cwd),
    json: <T = any>(...args: string[]) => cliJson<T>(args, env, current().cwd),
    serve(args, extra = {}) {
      const s = startServe(args, { ...env, ...extra }, current().cwd);
      servers.push(s);
      return s;
    },
  };
}
