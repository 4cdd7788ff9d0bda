/**
 * Copying one store's database into another (`cos-admin db copy`): SQLite to Postgres, Postgres to
 * SQLite, or within one dialect.
 *
 * - The source is read from one consistent snapshot: a read transaction on SQLite (WAL keeps the
 *   snapshot while the serving instance goes on writing), a REPEATABLE READ, READ ONLY transaction on
 *   Postgres.
 * - The target must be empty: no table of its own beside this schema's, no row in any of them. It is
 *   migrated to the code's schema (the source must be at the same version), then filled inside ONE
 *   transaction, so a failure or an interrupted process leaves it migrated and empty.
 * - Rows go table by table in a keyset walk over each table's primary key, a batch at a time, so
 *   memory stays bounded whatever the size of the source. Values are copied as stored: key digests,
 *   sealed webhook secrets, audit hashes and outbox sequence numbers are not recomputed; only the
 *   dialects' spellings of a boolean and of a big integer are translated.
 *
 * The store-level invariants (the audit chain, the key digests) are checked afterwards by the caller.
 */
import type { Knex } from 'knex';
import type { SqlDialect } from './database-url.js';
import { MIGRATIONS, MIGRATIONS_TABLE } from './migrations/index.js';
import type { SqlStore } from './sql-store.js';

/** What `copyDatabase` does with one table of the schema. */
export interface CopiedTable {
  readonly name: string;
  /** Its primary key, the keyset the copy walks (in the source's order). */
  readonly key: readonly string[];
  /** Columns holding a boolean: 0/1 on SQLite, true/false on Postgres. */
  readonly booleans?: readonly string[];
}

/**
 * Every table the copy carries, parents before the tables that reference them. Each is durable state
 * an instance on the target must find: credentials, lineage and scopes, key policies, the audit chain,
 * webhook endpoints with their sealed secrets, the outbox, exposures already reported, idempotency
 * records (replays keep replaying), and the keys' usage history (what the usage routes answer).
 */
export const COPIED_TABLES: readonly CopiedTable[] = Object.freeze([
  { name: 'organisations', key: ['id'], booleans: ['is_system'] },
  { name: 'members', key: ['id'] },
  { name: 'api_keys', key: ['id'] },
  { name: 'organisation_key_policies', key: ['organisation_id'] },
  { name: 'webhook_endpoints', key: ['organisation_id'], booleans: ['enabled'] },
  { name: 'webhook_outbox', key: ['id'] },
  { name: 'api_key_exposures', key: ['key_id', 'url_hash'] },
  { name: 'audit_entries', key: ['id'] },
  { name: 'idempotency_keys', key: ['organisation_id', 'idem_key'] },
  { name: 'key_usage', key: ['key_id', 'hour_start'] },
]);

/**
 * Tables of the schema the copy leaves out, and why: the instance registry lists the processes
 * running against the source (each instance records itself again when it starts on the target, and
 * a row copied over would name a process that does not run there); knex's migration lock is
 * bookkeeping the target's own migration writes.
 */
export const SKIPPED_TABLES: Readonly<Record<string, string>> = Object.freeze({
  instance_registry: 'instances register themselves when they start on the target',
  [MIGRATIONS_TABLE]: "written by the target's own migration",
  [`${MIGRATIONS_TABLE}_lock`]: "written by the target's own migration",
});

/** Rows read and written per statement (the widest table, audit_entries, stays far below SQLite's 32,766 bound variables). */
const COPY_BATCH = 500;

export interface TableProgress {
  readonly table: string;
  readonly copied: number;
  readonly total: number;
}

export interface CopyOptions {
  /** Called after every batch, and once per table when it is done (copied === total). */
  readonly onProgress?: (p: TableProgress) => void;
  readonly batchSize?: number;
}

export interface CopyResult {
  /** Rows copied per table, in copy order. */
  readonly tables: ReadonlyArray<{ readonly table: string; readonly rows: number }>;
  /** Migrations the target was given before the copy. */
  readonly migrated: readonly string[];
}

/** A refusal of the copy before anything was written to the target. */
export class CopyRefused extends Error {
  override readonly name = 'CopyRefused';
}

type Row = Record<string, unknown>;

function rowsOf(result: unknown): Row[] {
  return (Array.isArray(result) ? result : (result as { rows: Row[] }).rows) as Row[];
}

/** The tables of a database's current schema (SQLite's own tables excluded). */
export async function tablesOf(knex: Knex, dialect: SqlDialect): Promise<string[]> {
  const rows = rowsOf(
    await knex.raw(
      dialect === 'postgres'
        ? "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        : "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
    ),
  );
  return rows.map((r) => String(r['name'])).sort();
}

async function countRows(knex: Knex, table: string): Promise<number> {
  const [row] = rowsOf(await knex.raw(`SELECT count(*) AS n FROM ${table}`));
  return Number(row?.['n'] ?? 0);
}

/** Row counts of every copied table, in copy order. */
export async function tableCounts(knex: Knex): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const t of COPIED_TABLES) counts.set(t.name, await countRows(knex, t.name));
  return counts;
}

/** Migrations applied to a database (empty when it has none), oldest first. */
async function appliedMigrations(knex: Knex, dialect: SqlDialect): Promise<string[]> {
  if (!(await tablesOf(knex, dialect)).includes(MIGRATIONS_TABLE)) return [];
  return rowsOf(await knex.raw(`SELECT name FROM ${MIGRATIONS_TABLE} ORDER BY id`)).map((r) => String(r['name']));
}

/**
 * Checks both ends before anything is written: the source at exactly the code's schema, the target
 * empty (a schema of this service at most, without rows). Throws CopyRefused otherwise.
 */
export async function checkCopyEnds(source: SqlStore, target: SqlStore): Promise<void> {
  const known = MIGRATIONS.map((m) => m.name);
  const sourceApplied = await appliedMigrations(source.knex, source.dialect);
  const unknown = sourceApplied.filter((name) => !known.includes(name));
  if (unknown.length > 0) {
    throw new CopyRefused(`the source database has migrations this version does not know (${unknown.join(', ')}): run the copy with the version that wrote them`);
  }
  const pending = known.filter((name) => !sourceApplied.includes(name));
  if (pending.length > 0) {
    throw new CopyRefused(`the source database is behind this version (${pending.length} pending migration${pending.length === 1 ? '' : 's'}): run \`cos-admin migrate\` on it first`);
  }
  const schema = new Set<string>([...COPIED_TABLES.map((t) => t.name), ...Object.keys(SKIPPED_TABLES)]);
  const present = await tablesOf(target.knex, target.dialect);
  const foreign = present.filter((t) => !schema.has(t));
  if (foreign.length > 0) {
    throw new CopyRefused(`the target database is not empty: it holds table${foreign.length === 1 ? '' : 's'} ${foreign.slice(0, 5).join(', ')}${foreign.length > 5 ? ', …' : ''}`);
  }
  const targetApplied = await appliedMigrations(target.knex, target.dialect);
  const strange = targetApplied.filter((name) => !known.includes(name));
  if (strange.length > 0) throw new CopyRefused(`the target database has migrations this version does not know (${strange.join(', ')})`);
  for (const table of [...COPIED_TABLES.map((t) => t.name), 'instance_registry']) {
    if (!present.includes(table)) continue;
    const n = await countRows(target.knex, table);
    if (n > 0) throw new CopyRefused(`the target database is not empty: ${table} holds ${n} row${n === 1 ? '' : 's'}`);
  }
}

/** A value as the target dialect stores it. */
function toTarget(value: unknown, boolean: boolean, dialect: SqlDialect): Knex.Value {
  if (value === null || value === undefined) return null;
  if (boolean) {
    const truth = value === true || value === 1 || value === '1' || value === 't' || value === 'true' || value === 1n;
    return dialect === 'sqlite' ? (truth ? 1 : 0) : truth;
  }
  return value as Knex.Value;
}

/** Runs `fn` in a transaction that reads one snapshot of the source. */
function inSourceSnapshot<T>(source: SqlStore, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  if (source.dialect === 'postgres') {
    return source.knex.transaction(
      async (trx) => {
        await trx.raw('SET LOCAL statement_timeout = 0');
        await trx.raw('SET LOCAL idle_in_transaction_session_timeout = 0');
        return fn(trx);
      },
      { isolationLevel: 'repeatable read', readOnly: true },
    );
  }
  // SQLite: the first read of a deferred transaction takes the snapshot every later read sees.
  return source.knex.transaction(fn);
}

async function copyTable(
  from: Knex.Transaction,
  to: Knex.Transaction,
  table: CopiedTable,
  targetDialect: SqlDialect,
  batch: number,
  onProgress: ((p: TableProgress) => void) | undefined,
): Promise<number> {
  const total = await countRows(from, table.name);
  const keys = table.key.join(', ');
  const booleans = new Set(table.booleans ?? []);
  let after: Knex.Value[] | null = null;
  let copied = 0;
  for (;;) {
    const where: string = after === null ? '' : ` WHERE (${keys}) > (${table.key.map(() => '?').join(', ')})`;
    const rows: Row[] = rowsOf(await from.raw(`SELECT * FROM ${table.name}${where} ORDER BY ${keys} LIMIT ?`, [...(after ?? []), batch]));
    if (rows.length === 0) break;
    const columns = Object.keys(rows[0]!);
    const bindings: Knex.Value[] = [];
    for (const row of rows) for (const c of columns) bindings.push(toTarget(row[c], booleans.has(c), targetDialect));
    const tuple = `(${columns.map(() => '?').join(', ')})`;
    await to.raw(`INSERT INTO ${table.name} (${columns.join(', ')}) VALUES ${rows.map(() => tuple).join(', ')}`, bindings);
    copied += rows.length;
    const last = rows[rows.length - 1]!;
    after = table.key.map((k) => last[k] as Knex.Value);
    onProgress?.({ table: table.name, copied, total });
    if (rows.length < batch) break;
  }
  if (copied === 0) onProgress?.({ table: table.name, copied, total });
  return copied;
}

/**
 * Copies every table of `source` into `target` (see the file's header). `checkCopyEnds` must have
 * passed. Returns the rows copied per table; throws with the target rolled back on any failure.
 */
export async function copyDatabase(source: SqlStore, target: SqlStore, options: CopyOptions = {}): Promise<CopyResult> {
  const migrated = await target.migrate();
  const batch = options.batchSize ?? COPY_BATCH;
  const tables = await inSourceSnapshot(source, (from) =>
    target.knex.transaction(async (to) => {
      if (target.dialect === 'postgres') {
        await to.raw('SET LOCAL statement_timeout = 0');
        await to.raw('SET LOCAL idle_in_transaction_session_timeout = 0');
      }
      const done: Array<{ table: string; rows: number }> = [];
      for (const table of COPIED_TABLES) {
        done.push({ table: table.name, rows: await copyTable(from, to, table, target.dialect, batch, options.onProgress) });
      }
      // The outbox's write order continues after the copied rows: Postgres draws it from a sequence
      // (SQLite takes max + 1 on insert).
      if (target.dialect === 'postgres') {
        await to.raw("SELECT setval('webhook_outbox_seq', (SELECT coalesce(max(seq), 0) + 1 FROM webhook_outbox), false)");
      }
      return done;
    }),
  );
  return { tables, migrated };
}
