// Postgres and Redis for scenario (b): reachability checks and a throw-away database per run.
import { randomBytes } from 'node:crypto';
import { importFrom } from './resolve.mjs';

export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

function redact(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

// Reachability only: a loaded machine may take seconds to accept a connection, which must not skip a scenario.
export async function checkPostgres(url) {
  const { default: pg } = await importFrom('store-sql', 'pg');
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    const { rows } = await client.query('select version() as v');
    return { ok: true, version: String(rows[0].v).split(' ').slice(0, 2).join(' ') };
  } catch (err) {
    return { ok: false, reason: `Postgres at ${redact(url)} unreachable: ${err.message || err.code}` };
  } finally {
    await client.end().catch(() => {});
  }
}

export async function checkRedis(url) {
  const { createClient } = await importFrom('limiter-redis', 'redis');
  const client = createClient({ url, socket: { connectTimeout: 10_000, reconnectStrategy: false } });
  client.on('error', () => {});
  try {
    await client.connect();
    const pong = await client.ping();
    const info = await client.info('server');
    const version = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
    return { ok: pong === 'PONG', version: `Redis ${version}`, reason: pong === 'PONG' ? undefined : `Redis answered ${pong}` };
  } catch (err) {
    return { ok: false, reason: `Redis at ${redact(url)} unreachable: ${err.message || err.code}` };
  } finally {
    await client.close?.().catch?.(() => {});
    try {
      client.destroy?.();
    } catch {
      // already closed
    }
  }
}

/**
 * Creates an empty database next to the one `url` names (so a bench run never touches the tests'
 * data) and returns its URL and a drop() that removes it again.
 */
export async function createScratchDatabase(url) {
  const { default: pg } = await importFrom('store-sql', 'pg');
  const name = `cos_bench_${process.pid}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end().catch(() => {});
  }
  const scratch = new URL(url);
  scratch.pathname = `/${name}`;
  return {
    url: scratch.toString(),
    name,
    async drop() {
      const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end().catch(() => {});
      }
    },
  };
}
