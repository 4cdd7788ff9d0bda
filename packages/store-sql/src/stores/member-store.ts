import type { Member, MemberStore, PageRequest } from '@cos/core';
import { execute, query, toDate, type StoreContext } from '../context.js';

const COLUMNS = 'id, organisation_id, email, created_at';

function memberFromRow(row: Record<string, unknown>): Member {
  return {
    id: String(row.id),
    organisationId: String(row.organisation_id),
    email: String(row.email),
    createdAt: toDate(row.created_at),
  };
}

/**
 * The e-mail's case-folded form, computed here rather than with SQL lower(): SQLite's lower() folds
 * ASCII only, so a column filled by JavaScript gives the same uniqueness on both dialects.
 */
function normalizeEmail(email: string): string {
  return email.toLowerCase();
}

const INSERT = 'INSERT INTO members (id, organisation_id, email, email_normalized, created_at) VALUES (?, ?, ?, ?, ?)';
const FIND = `SELECT ${COLUMNS} FROM members WHERE organisation_id = ? AND id = ?`;
const DELETE = 'DELETE FROM members WHERE organisation_id = ? AND id = ?';
const LIST_FIRST = `SELECT ${COLUMNS} FROM members WHERE organisation_id = ? ORDER BY created_at, id LIMIT ?`;
const LIST_AFTER = `SELECT ${COLUMNS} FROM members WHERE organisation_id = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?`;

export class SqlMemberStore implements MemberStore {
  constructor(private readonly ctx: StoreContext) {}

  async add(m: Member): Promise<void> {
    await execute(this.ctx, INSERT, [m.id, m.organisationId, m.email, normalizeEmail(m.email), m.createdAt.getTime()]);
  }

  async find(organisationId: string, memberId: string): Promise<Member | null> {
    const rows = await query(this.ctx, FIND, [organisationId, memberId]);
    return rows[0] === undefined ? null : memberFromRow(rows[0]);
  }

  async remove(organisationId: string, memberId: string): Promise<boolean> {
    return (await execute(this.ctx, DELETE, [organisationId, memberId])) > 0;
  }

  async list(organisationId: string, page: PageRequest): Promise<Member[]> {
    const rows =
      page.after === null
        ? await query(this.ctx, LIST_FIRST, [organisationId, page.limit])
        : await query(this.ctx, LIST_AFTER, [organisationId, page.after.createdAt.getTime(), page.after.id, page.limit]);
    return rows.map(memberFromRow);
  }
}
