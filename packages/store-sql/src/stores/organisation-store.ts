import type { NaceSection, Organisation, OrganisationChanges, OrganisationStore, PageRequest } from '@cos/core';
import { execute, query, toBool, toDate, type StoreContext } from '../context.js';

export const ORGANISATION_COLUMNS = 'id, name, slug, industry_section, is_system, created_at, updated_at';

export function organisationFromRow(row: Record<string, unknown>): Organisation {
  return {
    id: String(row.id),
    name: String(row.name),
    slug: String(row.slug),
    industrySection: row.industry_section === null || row.industry_section === undefined ? null : (String(row.industry_section) as NaceSection),
    isSystem: toBool(row.is_system),
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
  };
}

const INSERT = `INSERT INTO organisations (${ORGANISATION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)`;
const BY_ID = `SELECT ${ORGANISATION_COLUMNS} FROM organisations WHERE id = ?`;
const FIRST_SYSTEM = `SELECT ${ORGANISATION_COLUMNS} FROM organisations WHERE is_system = ? ORDER BY created_at, id LIMIT 1`;
const LIST_FIRST = `SELECT ${ORGANISATION_COLUMNS} FROM organisations ORDER BY created_at, id LIMIT ?`;
const LIST_AFTER = `SELECT ${ORGANISATION_COLUMNS} FROM organisations WHERE (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?`;

export class SqlOrganisationStore implements OrganisationStore {
  constructor(private readonly ctx: StoreContext) {}

  async create(o: Organisation): Promise<void> {
    try {
      await execute(this.ctx, INSERT, [o.id, o.name, o.slug, o.industrySection, o.isSystem, o.createdAt.getTime(), o.updatedAt.getTime()]);
    } catch (e) {
      throw this.ctx.errors.translate(e);
    }
  }

  /** On a SQLite file outside a unit of work: on the read-only connection once open (see SqlApiKeyStore.findCredential). */
  findById(id: string): Promise<Organisation | null> {
    const reader = this.ctx.reader;
    if (reader?.ready === true) {
      try {
        const row = reader.get(BY_ID, [id]);
        return Promise.resolve(row === undefined ? null : organisationFromRow(row));
      } catch (e) {
        return Promise.reject(this.ctx.errors.translate(e));
      }
    }
    return this.findByIdThroughPool(id);
  }

  private async findByIdThroughPool(id: string): Promise<Organisation | null> {
    try {
      const rows = await query(this.ctx, BY_ID, [id]);
      this.ctx.reader?.activate();
      return rows.length === 0 ? null : organisationFromRow(rows[0]!);
    } catch (e) {
      throw this.ctx.errors.translate(e);
    }
  }

  async findFirstSystem(): Promise<Organisation | null> {
    try {
      const rows = await query(this.ctx, FIRST_SYSTEM, [true]);
      return rows.length === 0 ? null : organisationFromRow(rows[0]!);
    } catch (e) {
      throw this.ctx.errors.translate(e);
    }
  }

  async update(id: string, changes: OrganisationChanges): Promise<Organisation | null> {
    const sets: string[] = [];
    const bindings: unknown[] = [];
    if (changes.name !== undefined) {
      sets.push('name = ?');
      bindings.push(changes.name);
    }
    if (changes.industrySection !== undefined) {
      sets.push('industry_section = ?');
      bindings.push(changes.industrySection);
    }
    sets.push('updated_at = ?');
    bindings.push(changes.updatedAt.getTime(), id);
    try {
      // RETURNING: one round trip on Postgres and on SQLite >= 3.35 (better-sqlite3 12 bundles newer).
      const rows = await query(this.ctx, `UPDATE organisations SET ${sets.join(', ')} WHERE id = ? RETURNING ${ORGANISATION_COLUMNS}`, bindings);
      return rows.length === 0 ? null : organisationFromRow(rows[0]!);
    } catch (e) {
      throw this.ctx.errors.translate(e);
    }
  }

  async list(page: PageRequest): Promise<Organisation[]> {
    try {
      const rows =
        page.after === null
          ? await query(this.ctx, LIST_FIRST, [page.limit])
          : await query(this.ctx, LIST_AFTER, [page.after.createdAt.getTime(), page.after.id, page.limit]);
      return rows.map(organisationFromRow);
    } catch (e) {
      throw this.ctx.errors.translate(e);
    }
  }
}
