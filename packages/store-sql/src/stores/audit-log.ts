import type { AuditActor, AuditEntry, AuditFilter, AuditKind, AuditLog, PageRequest } from '@cos/core';
import { execute, query, stringOrNull, toDate, type StoreContext } from '../context.js';

const COLUMNS = 'id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, actor_key_id';

function actorFromRow(row: Record<string, unknown>): AuditActor {
  return row.actor_type === 'api_key' ? { type: 'api_key', keyId: String(row.actor_key_id) } : { type: 'operator' };
}

function entryFromRow(row: Record<string, unknown>): AuditEntry {
  return {
    id: String(row.id),
    kind: String(row.kind) as AuditKind,
    occurredAt: toDate(row.occurred_at),
    organisationId: String(row.organisation_id),
    keyId: stringOrNull(row.key_id),
    keyPrefix: stringOrNull(row.key_prefix),
    actor: actorFromRow(row),
  };
}

const INSERT = `INSERT INTO audit_entries (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;

/** Append-only (C-41): this class has no update and no delete. */
export class SqlAuditLog implements AuditLog {
  /** The eight filter/keyset shapes, built once per shape and reused. */
  private static readonly listSql = new Map<string, string>();

  constructor(private readonly ctx: StoreContext) {}

  async append(e: AuditEntry): Promise<void> {
    try {
      await execute(this.ctx, INSERT, [
        e.id,
        e.kind,
        e.occurredAt.getTime(),
        e.organisationId,
        e.keyId,
        e.keyPrefix,
        e.actor.type,
        e.actor.type === 'api_key' ? e.actor.keyId : null,
      ]);
    } catch (err) {
      throw this.ctx.errors.translate(err);
    }
  }

  async list(filter: AuditFilter, page: PageRequest): Promise<AuditEntry[]> {
    const hasOrg = filter.organisationId !== undefined;
    const hasKind = filter.kind !== undefined;
    const hasAfter = page.after !== null;
    const bindings: unknown[] = [];
    if (hasOrg) bindings.push(filter.organisationId);
    if (hasKind) bindings.push(filter.kind);
    if (page.after !== null) bindings.push(page.after.createdAt.getTime(), page.after.id);
    bindings.push(page.limit);
    try {
      const rows = await query(this.ctx, SqlAuditLog.sql(hasOrg, hasKind, hasAfter), bindings);
      return rows.map(entryFromRow);
    } catch (err) {
      throw this.ctx.errors.translate(err);
    }
  }

  private static sql(hasOrg: boolean, hasKind: boolean, hasAfter: boolean): string {
    const shape = `${+hasOrg}${+hasKind}${+hasAfter}`;
    let sql = SqlAuditLog.listSql.get(shape);
    if (sql === undefined) {
      const where: string[] = [];
      if (hasOrg) where.push('organisation_id = ?');
      if (hasKind) where.push('kind = ?');
      if (hasAfter) where.push('(occurred_at, id) > (?, ?)');
      sql = `SELECT ${COLUMNS} FROM audit_entries${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY occurred_at, id LIMIT ?`;
      SqlAuditLog.listSql.set(shape, sql);
    }
    return sql;
  }
}
