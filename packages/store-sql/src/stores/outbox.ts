import type { AttemptOutcome, Notification, NotificationStatus, Outbox, OutboxFilter, PageRequest, WebhookEventType } from '@cos/core';
import { execute, msOrNull, query, stringOrNull, toDate, toDateOrNull, translated, type SqlSession, type StoreContext } from '../context.js';
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

/** Postgres: `seq` comes from its sequence (the column default). SQLite: writes are serialised, so max + 1 is unique and in write order. */
const INSERT = {
  postgres: `INSERT INTO webhook_outbox (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  sqlite: `INSERT INTO webhook_outbox (${COLUMNS}, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM webhook_outbox))`,
} as const;
const BY_ID = `SELECT ${COLUMNS} FROM webhook_outbox WHERE id = ?`;
/**
 * Per organisation (its one endpoint) with pending notifications and none under a live claim: its
 * due notification written first (lowest seq); of those, the oldest due first. One attempt at a time
 * per endpoint, in write order. The organisations are walked through the partial index of pending
 * rows one key at a time (a recursive "next organisation after this one" lookup), so the cost grows
 * with the organisations that have pending notifications, not with the rows: an endpoint with a
 * backlog of 100,000 whose attempt is in flight costs one index probe (its leased row), not a scan
 * of its backlog, and one whose notifications all wait for their next attempt one probe of the
 * index by due time.
 */
function due(dialect: 'postgres' | 'sqlite'): string {
  // SQLite without statistics (no ANALYZE) would walk a status index and sort: it is told which index.
  const pending = dialect === 'sqlite' ? ' INDEXED BY webhook_outbox_pending_organisation_seq' : '';
  const leased = dialect === 'sqlite' ? ' INDEXED BY webhook_outbox_leased_organisation' : '';
  const dueIndex = dialect === 'sqlite' ? ' INDEXED BY webhook_outbox_pending_organisation_due' : '';
  return `WITH RECURSIVE orgs (organisation_id) AS (
      SELECT (SELECT p.organisation_id FROM webhook_outbox AS p${pending} WHERE p.status = 'pending' ORDER BY p.organisation_id LIMIT 1)
      UNION ALL
      SELECT (SELECT p.organisation_id FROM webhook_outbox AS p${pending}
          WHERE p.status = 'pending' AND p.organisation_id > orgs.organisation_id ORDER BY p.organisation_id LIMIT 1)
        FROM orgs WHERE orgs.organisation_id IS NOT NULL
    )
    SELECT o.id FROM webhook_outbox o
    WHERE o.id IN (
      SELECT (SELECT h.id FROM webhook_outbox AS h${pending}
          WHERE h.organisation_id = orgs.organisation_id AND h.status = 'pending' AND h.next_attempt_at <= ?
          ORDER BY h.seq LIMIT 1)
        FROM orgs
        WHERE orgs.organisation_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM webhook_outbox AS e${leased}
            WHERE e.organisation_id = orgs.organisation_id AND e.status = 'pending' AND e.lease_until > ?)
          AND EXISTS (SELECT 1 FROM webhook_outbox AS d${dueIndex}
            WHERE d.organisation_id = orgs.organisation_id AND d.status = 'pending' AND d.next_attempt_at <= ?)
    )
    ORDER BY o.next_attempt_at, o.id LIMIT ?`;
}
/**
 * The claim, one statement. Postgres: the rows are locked as they are picked, and a row another
 * statement holds locked (a completion, an operator's retry) is skipped rather than waited for;
 * claims themselves run one at a time (the claim lock below). SQLite: a write statement takes the
 * file's write lock before it reads, so claims run one at a time.
 */
const CLAIM = {
  postgres: `UPDATE webhook_outbox SET attempts = attempts + 1, claim_id = ?, lease_until = ?
    WHERE id IN (${due('postgres')} FOR UPDATE OF o SKIP LOCKED) RETURNING ${COLUMNS}`,
  sqlite: `UPDATE webhook_outbox SET attempts = attempts + 1, claim_id = ?, lease_until = ?
    WHERE id IN (${due('sqlite')}) RETURNING ${COLUMNS}`,
} as const;
/**
 * Postgres: claims are taken one at a time (a transaction-scoped advisory lock, the claim statement
 * after it). Row locks alone cannot keep two concurrent claims off two rows of one organisation: each
 * statement judges "written first, nothing under a live claim" on its own snapshot, and a row that
 * commits late with an earlier place in line is visible to one and not the other. After the lock, the
 * claim's snapshot sees every claim committed before it. Claims are short: the wait is milliseconds.
 * The key is a fixed 64-bit number ('cos_whob' in ASCII).
 */
const CLAIM_LOCK_KEY = '7165072386032168802';
const CLAIM_LOCK = 'SELECT pg_advisory_xact_lock(?::bigint)';
/** Every completion releases the lease; only the holder of the claim, while still pending, may complete. */
const UNDER_CLAIM = "WHERE id = ? AND claim_id = ? AND status = 'pending'";
const COMPLETE = {
  delivered: `UPDATE webhook_outbox SET status = 'delivered', completed_at = ?, claim_id = NULL, lease_until = NULL ${UNDER_CLAIM}`,
  pending: `UPDATE webhook_outbox SET next_attempt_at = ?, last_error = ?, claim_id = NULL, lease_until = NULL ${UNDER_CLAIM}`,
  failed: `UPDATE webhook_outbox SET status = 'failed', completed_at = ?, last_error = ?, claim_id = NULL, lease_until = NULL ${UNDER_CLAIM}`,
} as const;
const RELEASE = `UPDATE webhook_outbox SET claim_id = NULL, lease_until = NULL ${UNDER_CLAIM}`;
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
    await execute(this.ctx, INSERT[this.ctx.dialect], [
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
    const bindings = [claim, leaseUntil.getTime(), nowMs, nowMs, nowMs, Math.max(0, Math.floor(limit))];
    if (this.ctx.dialect === 'sqlite') return (await query(this.ctx, CLAIM.sqlite, bindings)).map(notificationFromRow).sort(byDue);
    const claimOn = async (session: SqlSession): Promise<Notification[]> => {
      await session.run(CLAIM_LOCK, [CLAIM_LOCK_KEY]);
      return (await session.run(CLAIM.postgres, bindings)).rows.map(notificationFromRow).sort(byDue);
    };
    // Inside a unit of work the lock is held until it ends; outside, a transaction of its own.
    const { transaction } = this.ctx;
    if (this.ctx.inTransaction || transaction === undefined) return translated(this.ctx.errors, () => claimOn(this.ctx.session));
    return translated(this.ctx.errors, () => transaction(claimOn));
  }

  async complete(id: string, claim: string, outcome: AttemptOutcome): Promise<boolean> {
    return (await execute(this.ctx, COMPLETE[outcome.status], [...outcomeBindings(outcome), id, claim])) > 0;
  }

  async release(id: string, claim: string): Promise<boolean> {
    return (await execute(this.ctx, RELEASE, [id, claim])) > 0;
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
