import type { AttemptOutcome, Notification, NotificationStatus, Outbox, OutboxFilter, PageRequest, WebhookEventType } from '@cos/core';
import { execute, msOrNull, query, stringOrNull, toDate, toDateOrNull, type StoreContext } from '../context.js';
import { KeysetListSql } from '../keyset-list.js';

const COLUMNS = 'id, organisation_id, event_type, payload, status, attempts, next_attempt_at, created_at, completed_at, last_error';

function notificationFromRow(row: Record<string, unknown>): Notification {
  return {
    id: String(row.id),
    organisationId: String(row.organisation_id),
    type: String(row.event_type) as WebhookEventType,
    payload: String(row.payload),
    status: String(row.status) as NotificationStatus,
    attempts: Number(row.attempts),
    nextAttemptAt: toDate(row.next_attempt_at),
    createdAt: toDate(row.created_at),
    completedAt: toDateOrNull(row.completed_at),
    lastError: stringOrNull(row.last_error),
  };
}

/** Oldest due first, as the claim picks them (RETURNING promises no order). */
function byDue(a: Notification, b: Notification): number {
  const d = a.nextAttemptAt.getTime() - b.nextAttemptAt.getTime();
  return d !== 0 ? d : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

const INSERT = `INSERT INTO webhook_outbox (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const BY_ID = `SELECT ${COLUMNS} FROM webhook_outbox WHERE id = ?`;
const DUE = `SELECT id FROM webhook_outbox
    WHERE status = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
    ORDER BY next_attempt_at, id LIMIT ?`;
/**
 * The claim, one statement. Postgres: the rows are locked as they are picked and rows another claim
 * holds locked are skipped, so concurrent senders (several instances) take disjoint sets without
 * waiting; a row claimed and committed meanwhile is re-checked (its lease is live) and dropped.
 * SQLite: a write statement takes the file's write lock before it reads, so claims run one at a time.
 */
const CLAIM = {
  postgres: `UPDATE webhook_outbox SET attempts = attempts + 1, claim_id = ?, lease_until = ?
    WHERE id IN (${DUE} FOR UPDATE SKIP LOCKED) RETURNING ${COLUMNS}`,
  sqlite: `UPDATE webhook_outbox SET attempts = attempts + 1, claim_id = ?, lease_until = ?
    WHERE id IN (${DUE}) RETURNING ${COLUMNS}`,
} as const;
/** Every completion releases the lease; only the holder of the claim, while still pending, may complete. */
const UNDER_CLAIM = "WHERE id = ? AND claim_id = ? AND status = 'pending'";
const COMPLETE = {
  delivered: `UPDATE webhook_outbox SET status = 'delivered', completed_at = ?, claim_id = NULL, lease_until = NULL ${UNDER_CLAIM}`,
  pending: `UPDATE webhook_outbox SET next_attempt_at = ?, last_error = ?, claim_id = NULL, lease_until = NULL ${UNDER_CLAIM}`,
  failed: `UPDATE webhook_outbox SET status = 'failed', completed_at = ?, last_error = ?, claim_id = NULL, lease_until = NULL ${UNDER_CLAIM}`,
} as const;
const RETRY = `UPDATE webhook_outbox SET status = 'pending', attempts = 0, next_attempt_at = ?, completed_at = NULL, claim_id = NULL, lease_until = NULL
  WHERE id = ? AND status <> 'delivered'`;
const COUNT_PENDING = "SELECT count(*) AS n FROM webhook_outbox WHERE status = 'pending'";
/**
 * Oldest completed first, a bounded batch per statement (a short write lock on SQLite, a short
 * transaction on Postgres), through webhook_outbox_completed_at_id. Pending rows have no
 * completed_at; the status test keeps them out all the same, written as an inequality so that the
 * planners (SQLite's in particular) take the completed_at index rather than the status one.
 */
const PURGE = `DELETE FROM webhook_outbox WHERE id IN (
    SELECT id FROM webhook_outbox WHERE completed_at < ? AND status <> 'pending' ORDER BY completed_at, id LIMIT ?)`;
const LIST = new KeysetListSql('webhook_outbox', COLUMNS, 'created_at', ['organisation_id', 'status']);

function outcomeBindings(outcome: AttemptOutcome): unknown[] {
  switch (outcome.status) {
    case 'delivered':
      return [outcome.at.getTime()];
    case 'pending':
      return [outcome.nextAttemptAt.getTime(), outcome.error];
    case 'failed':
      return [outcome.at.getTime(), outcome.error];
  }
}

/** The webhook outbox (C-59): see the Outbox port for the claim and lease rules. */
export class SqlOutbox implements Outbox {
  constructor(private readonly ctx: StoreContext) {}

  async enqueue(n: Notification): Promise<void> {
    await execute(this.ctx, INSERT, [
      n.id,
      n.organisationId,
      n.type,
      n.payload,
      n.status,
      n.attempts,
      n.nextAttemptAt.getTime(),
      n.createdAt.getTime(),
      msOrNull(n.completedAt),
      n.lastError,
    ]);
  }

  async claimDue(now: Date, leaseUntil: Date, limit: number, claim: string): Promise<Notification[]> {
    const nowMs = now.getTime();
    const rows = await query(this.ctx, CLAIM[this.ctx.dialect], [claim, leaseUntil.getTime(), nowMs, nowMs, Math.max(0, Math.floor(limit))]);
    return rows.map(notificationFromRow).sort(byDue);
  }

  async complete(id: string, claim: string, outcome: AttemptOutcome): Promise<boolean> {
    return (await execute(this.ctx, COMPLETE[outcome.status], [...outcomeBindings(outcome), id, claim])) > 0;
  }

  async findById(id: string): Promise<Notification | null> {
    const rows = await query(this.ctx, BY_ID, [id]);
    return rows.length === 0 ? null : notificationFromRow(rows[0]!);
  }

  async list(filter: OutboxFilter, page: PageRequest): Promise<Notification[]> {
    const { sql, bindings } = LIST.build([filter.organisationId, filter.status], page);
    return (await query(this.ctx, sql, bindings)).map(notificationFromRow);
  }

  async retry(id: string, now: Date): Promise<boolean> {
    return (await execute(this.ctx, RETRY, [now.getTime(), id])) > 0;
  }

  async countPending(): Promise<number> {
    const rows = await query<{ n: unknown }>(this.ctx, COUNT_PENDING, []);
    return Number(rows[0]?.n ?? 0);
  }

  async purgeCompleted(completedBefore: Date, limit: number): Promise<number> {
    return execute(this.ctx, PURGE, [completedBefore.getTime(), Math.max(0, Math.floor(limit))]);
  }
}
