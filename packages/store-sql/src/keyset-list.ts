import type { PageRequest } from '@cos/core';

/**
 * One keyset page of a table with optional equality filters (C-6, C-7): `WHERE <filters> AND
 * (<time>, id) > (?, ?) ORDER BY <time>, id LIMIT ?`. The SQL of each shape (which filters are
 * given, first page or not) is built once and reused, so prepared-statement caches see a fixed set.
 * A fixed `condition` (SQL without parameters) is part of every shape's WHERE: the predicate of a
 * partial index, which a planner uses only when the statement's WHERE implies it.
 */
export class KeysetListSql {
  private readonly shapes = new Map<string, string>();

  constructor(
    private readonly table: string,
    private readonly columns: string,
    /** The time column of the keyset (`created_at`, `occurred_at`). */
    private readonly timeColumn: string,
    /** Columns filtered by equality, in the order `build` receives their values. */
    private readonly filterColumns: readonly string[],
    private readonly condition?: string,
  ) {}

  /** `filters[i]` undefined: no filter on `filterColumns[i]`. */
  build(filters: readonly unknown[], page: PageRequest): { sql: string; bindings: unknown[] } {
    if (filters.length !== this.filterColumns.length) throw new Error(`${this.table}: expected ${this.filterColumns.length} filter values`);
    const bindings = filters.filter((value) => value !== undefined);
    let shape = filters.map((value) => (value === undefined ? '0' : '1')).join('');
    if (page.after !== null) bindings.push(page.after.createdAt.getTime(), page.after.id);
    shape += page.after === null ? '0' : '1';
    bindings.push(page.limit);
    let sql = this.shapes.get(shape);
    if (sql === undefined) {
      const where = this.filterColumns.filter((_, i) => filters[i] !== undefined).map((c) => `${c} = ?`);
      if (this.condition !== undefined) where.push(this.condition);
      if (page.after !== null) where.push(`(${this.timeColumn}, id) > (?, ?)`);
      sql = `SELECT ${this.columns} FROM ${this.table}${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY ${this.timeColumn}, id LIMIT ?`;
      this.shapes.set(shape, sql);
    }
    return { sql, bindings };
  }
}
