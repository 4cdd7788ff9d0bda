/**
 * Every row of every table of the service's schema, in a canonical order, so that "nothing
 * changed" is one deep-equal (C-17, C-34, "no state change after a 4xx").
 */
import type { Knex } from './stack.js';

export type Snapshot = Record<string, string[]>;

function dialectOf(knex: Knex): 'sqlite' | 'postgres' {
  const client = String((knex.client as { config?: { client?: unknown } }).config?.client ?? '');
  return /pg|postgres/.test(client) ? 'postgres' : 'sqlite';
}

function canonical(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  if (Buffer.isBuffer(value)) return value.toString('hex');
  if (typeof value === 'bigint') return value.toString();
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) out[k] = canonical((value as Record<string, unknown>)[k]);
    return out;
  }
  return value;
}

/** Table names of the service (migration bookkeeping included: it must not change either). */
export async function tableNames(knex: Knex): Promise<string[]> {
  if (dialectOf(knex) === 'postgres') {
    const rows = (await knex
      .select('table_name as name')
      .from('information_schema.tables')
      .whereRaw('table_schema = current_schema()')
      .andWhere('table_type', 'BASE TABLE')) as { name: string }[];
    return rows.map((r) => r.name).sort();
  }
  const rows = (await knex.select('name').from('sqlite_master').where('type', 'table').andWhereNot('name', 'like', 'sqlite_%')) as {
    name: string;
  }[];
  return rows.map((r) => r.name).sort();
}

/**
 * Bookkeeping that any request may write in the background and that is no state change of the
 * request itself: a key's last successful use (a first use is written at once, C-22's records show
 * it as `last_used_at`), the usage counts written with it (every request of a key counts) and a
 * caching instance's heartbeat. Left out of snapshots.
 */
const BOOKKEEPING: Readonly<Record<string, readonly string[]>> = { api_keys: ['last_used_at'], instance_registry: ['heartbeat_at'] };
const BOOKKEEPING_TABLES: ReadonlySet<string> = new Set(['key_usage']);

export async function snapshot(knex: Knex, tables?: readonly string[]): Promise<Snapshot> {
  const out: Snapshot = {};
  for (const table of tables ?? (await tableNames(knex))) {
    if (BOOKKEEPING_TABLES.has(table)) continue;
    const rows = (await knex.select('*').from(table)) as Record<string, unknown>[];
    const left = BOOKKEEPING[table] ?? [];
    out[table] = rows
      .map((r) => {
        const kept = { ...r };
        for (const column of left) delete kept[column];
        return JSON.stringify(canonical(kept));
      })
      .sort();
  }
  return out;
}

/** Human-readable difference of two snapshots (empty when equal). */
export function diffSnapshots(before: Snapshot, after: Snapshot): string[] {
  const out: string[] = [];
  for (const table of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const b = new Set(before[table] ?? []);
    const a = new Set(after[table] ?? []);
    for (const row of a) if (!b.has(row)) out.push(`${table} + ${row}`);
    for (const row of b) if (!a.has(row)) out.push(`${table} - ${row}`);
  }
  return out;
}

/** Every cell of every table as text (for secret scans). */
export async function allCells(knex: Knex): Promise<{ table: string; column: string; value: string }[]> {
  const out: { table: string; column: string; value: string }[] = [];
  for (const table of await tableNames(knex)) {
    const rows = (await knex.select('*').from(table)) as Record<string, unknown>[];
    for (const row of rows)
      for (const [column, value] of Object.entries(row)) {
        if (value === null || value === undefined) continue;
        const text = Buffer.isBuffer(value) ? `${value.toString('utf8')} ${value.toString('hex')}` : value instanceof Date ? value.toISOString() : typeof value === 'object' ? JSON.stringify(value) : String(value);
        out.push({ table, column, value: text });
      }
  }
  return out;
}

/**
 * "Did this request change anything?" at the cost of one query when nothing changed: on SQLite
 * (one connection) `total_changes()` counts every row any statement inserted, updated or deleted,
 * so an unchanged count proves an unchanged database; only when it moved are full snapshots
 * compared. Other dialects compare full snapshots every time.
 */
export class StateProbe {
  private last: { changes: number; snap: Snapshot } | null = null;
  private pending: { changes: number; snap: Snapshot } | null = null;

  constructor(private readonly knex: Knex) {}

  private async changes(): Promise<number | null> {
    if (dialectOf(this.knex) !== 'sqlite') return null;
    const rows = (await this.knex.raw('select total_changes() as n')) as { n: number }[];
    return Number(rows[0]?.n);
  }

  /** Call before the request. */
  async mark(): Promise<void> {
    const changes = await this.changes();
    if (changes !== null && this.last !== null && this.last.changes === changes) {
      this.pending = this.last;
      return;
    }
    this.pending = { changes: changes ?? -1, snap: await snapshot(this.knex) };
  }

  /** Call after the response: the rows that changed since mark() (empty when none did). */
  async diff(): Promise<string[]> {
    const before = this.pending;
    if (before === null) throw new Error('mark() first');
    const changes = await this.changes();
    if (changes !== null && changes === before.changes) {
      this.last = before;
      return [];
    }
    const after = await snapshot(this.knex);
    this.last = { changes: changes ?? -1, snap: after };
    return diffSnapshots(before.snap, after);
  }
}
