// Bulk seeding for scenarios (d) and (e), straight through the store's own knex (and its schema:
// packages/store-sql/src/migrations/ — ids as text, timestamps as epoch ms). Filler keys are seeded
// as random digests only: no raw key is ever made for a filler, since only the digest is stored
// (C-31). The keys (d) authenticates with are real ones, made and digested by the core's own
// functions, their raw form kept only by the bench (seedLookupKeys).
import { randomBytes, randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { importBuilt, ROOT } from './resolve.mjs';

const ROWS_PER_STATEMENT = 500;
/** Filler rows are dated before anything the CLI made, so the CLI's records stay the newest. */
const FILLER_EPOCH_MS = Date.UTC(2025, 0, 1);

async function withStore(databaseUrl, fn) {
  const { createSqlStore } = await importBuilt('store-sql');
  const store = createSqlStore({ databaseUrl, statementTimeoutMs: 600_000 });
  try {
    return await fn(store.knex);
  } finally {
    await store.close();
  }
}

/** Inserts `rows` (arrays in `columns` order) in multi-row statements inside one transaction. */
async function bulkInsert(knex, table, columns, count, rowAt) {
  const one = `(${columns.map(() => '?').join(', ')})`;
  await knex.transaction(async (trx) => {
    for (let start = 0; start < count; start += ROWS_PER_STATEMENT) {
      const n = Math.min(ROWS_PER_STATEMENT, count - start);
      const bindings = [];
      for (let i = 0; i < n; i++) bindings.push(...rowAt(start + i));
      await trx.raw(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${Array(n).fill(one).join(', ')}`, bindings);
    }
  });
}

async function countOf(knex, table) {
  const rows = await knex.raw(`SELECT count(*) AS n FROM ${table}`);
  return Number((Array.isArray(rows) ? rows : rows.rows)[0].n);
}

const ORG_COLUMNS = ['id', 'name', 'slug', 'industry_section', 'is_system', 'created_at', 'updated_at'];
const KEY_COLUMNS = ['id', 'organisation_id', 'label', 'key_prefix', 'digest', 'expires_at', 'created_at', 'revoked_at'];
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Adds organisations until the store holds `total`. */
export async function seedOrganisations(databaseUrl, { total }) {
  await withStore(databaseUrl, async (knex) => {
    const existing = await countOf(knex, 'organisations');
    const add = Math.max(0, total - existing);
    await bulkInsert(knex, 'organisations', ORG_COLUMNS, add, (i) => {
      const at = FILLER_EPOCH_MS + i;
      return [randomUUID(), `Filler organisation ${i}`, `filler-${i}`, null, false, at, at];
    });
  });
}

/**
 * Issues `count` real live keys to the existing organisation `organisationId`, as `key issue` would
 * store them: the core's generateRawKey (C-30), digestKey (SHA-256 hex, C-31) and keyPrefixOf (first
 * 12 characters), active, no expiry. Returns the raw keys (the caller keeps them secret) and how many
 * active keys the organisation then holds (more than MAX_ACTIVE_KEYS_PER_ORG's default allows, C-25:
 * the service that reads this store must run with a cap at least that high).
 */
export async function seedLookupKeys(databaseUrl, { organisationId, count }) {
  const { generateRawKey, digestKey, keyPrefixOf } = await importBuilt('core');
  const random = { bytes: (n) => randomBytes(n), uuid: () => randomUUID() };
  const rawKeys = Array.from({ length: count }, () => generateRawKey('live', random));
  if (new Set(rawKeys).size !== count) throw new Error('two generated keys are equal');
  return withStore(databaseUrl, async (knex) => {
    await bulkInsert(knex, 'api_keys', KEY_COLUMNS, count, (i) => [
      randomUUID(),
      organisationId,
      `bench lookup ${i}`,
      keyPrefixOf(rawKeys[i]),
      digestKey(rawKeys[i]),
      null,
      FILLER_EPOCH_MS + i,
      null,
    ]);
    const rows = await knex.raw('SELECT count(*) AS n FROM api_keys WHERE organisation_id = ? AND revoked_at IS NULL AND expires_at IS NULL', [organisationId]);
    return { rawKeys, activeInOrganisation: Number((Array.isArray(rows) ? rows : rows.rows)[0].n) };
  });
}

/**
 * How many credentials the SQLite read connection's cache keeps (READ_CACHE_MAX_ENTRIES of
 * packages/store-sql/src/sqlite/reader.ts, not exported by the package), or null when the built
 * module has no such bound (the cache is gone or renamed).
 */
export async function readCacheBound() {
  try {
    const mod = await import(pathToFileURL(path.join(ROOT, 'packages', 'store-sql', 'dist', 'sqlite', 'reader.js')).href);
    return Number.isInteger(mod.READ_CACHE_MAX_ENTRIES) ? mod.READ_CACHE_MAX_ENTRIES : null;
  } catch {
    return null;
  }
}

/**
 * Adds `organisations` filler organisations, then filler keys (round-robin over them) until the
 * store holds `total` keys (none when it already does). Each filler key is a fresh random 32-byte
 * digest. Returns the number of keys the store then holds.
 */
export async function seedKeys(databaseUrl, { total, organisations }) {
  return withStore(databaseUrl, async (knex) => {
    const orgIds = Array.from({ length: organisations }, () => randomUUID());
    await bulkInsert(knex, 'organisations', ORG_COLUMNS, organisations, (i) => {
      const at = FILLER_EPOCH_MS + i;
      return [orgIds[i], `Key filler organisation ${i}`, `key-filler-${i}`, null, false, at, at];
    });
    const existing = await countOf(knex, 'api_keys');
    const add = Math.max(0, total - existing);
    const CHUNK = 65_536;
    let pool = randomBytes(CHUNK * 35);
    let used = 0;
    await bulkInsert(knex, 'api_keys', KEY_COLUMNS, add, (i) => {
      if (used === CHUNK) {
        pool = randomBytes(CHUNK * 35);
        used = 0;
      }
      const off = used++ * 35;
      const digest = pool.toString('hex', off, off + 32);
      const prefix = `svc_live_${ALNUM[pool[off + 32] % 62]}${ALNUM[pool[off + 33] % 62]}${ALNUM[pool[off + 34] % 62]}`;
      return [randomUUID(), orgIds[i % organisations], 'filler', prefix, digest, null, FILLER_EPOCH_MS + i, null];
    });
    const after = await countOf(knex, 'api_keys');
    if (after !== Math.max(total, existing)) throw new Error(`seeded ${after} keys, expected ${total}`);
    return after;
  });
}

/**
 * The cursor of the last page of organisations at `limit` per page: encodeCursor() of the keyset
 * position (created_at, id) of the record just before that page.
 */
export async function lastPageCursor(databaseUrl, limit) {
  const { encodeCursor } = await importBuilt('core');
  return withStore(databaseUrl, async (knex) => {
    const total = await countOf(knex, 'organisations');
    const result = await knex.raw('SELECT id, created_at FROM organisations ORDER BY created_at, id LIMIT 1 OFFSET ?', [total - limit - 1]);
    const row = (Array.isArray(result) ? result : result.rows)[0];
    return encodeCursor({ createdAt: new Date(Number(row.created_at)), id: String(row.id) });
  });
}
