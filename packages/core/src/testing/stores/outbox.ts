/** In memory: webhook notifications awaiting delivery (Outbox), with their claims. */
import type { Notification } from '../../domain/webhook.js';
import type { AttemptOutcome, Outbox, OutboxFilter } from '../../ports/outbox.js';
import type { PageRequest } from '../../ports/pagination.js';
import { type OutboxRow, copyDate, copyDateOrNull, compareKeyset, page, duplicateId } from '../in-memory-tables.js';
import type { Session } from '../in-memory-session.js';

function copyNotification(n: Notification): Notification {
  return {
    id: n.id,
    organisationId: n.organisationId,
    type: n.type,
    payload: n.payload,
    status: n.status,
    attempts: n.attempts,
    nextAttemptAt: copyDate(n.nextAttemptAt),
    createdAt: copyDate(n.createdAt),
    completedAt: copyDateOrNull(n.completedAt),
    lastError: n.lastError,
  };
}

export class InMemoryOutbox implements Outbox {
  constructor(private readonly session: Session) {}

  async enqueue(notification: Notification): Promise<void> {
    const record = copyNotification(notification);
    this.session.write((t) => {
      if (t.outbox.has(record.id)) throw duplicateId('Notification');
      t.outbox.set(record.id, { notification: record, claim: null, leaseUntil: null });
    });
  }

  /**
   * The outbox map keeps write order: a Map iterates in insertion order, an update in place keeps
   * its entry's position, and a transaction's enqueues are replayed in order at commit.
   */
  async claimDue(now: Date, leaseUntil: Date, limit: number, claim: string): Promise<Notification[]> {
    const nowMs = now.getTime();
    return this.session.write((t) => {
      const pending = [...t.outbox.values()].filter((r) => r.notification.status === 'pending');
      const busy = new Set(pending.filter((r) => r.leaseUntil !== null && r.leaseUntil.getTime() > nowMs).map((r) => r.notification.organisationId));
      // Per organisation without a live claim: its due notification written first.
      const heads = new Map<string, OutboxRow>();
      for (const r of pending) {
        const org = r.notification.organisationId;
        if (!busy.has(org) && !heads.has(org) && r.notification.nextAttemptAt.getTime() <= nowMs) heads.set(org, r);
      }
      const due = [...heads.values()]
        .sort((a, b) =>
          compareKeyset(a.notification.nextAttemptAt.getTime(), a.notification.id, b.notification.nextAttemptAt.getTime(), b.notification.id),
        )
        .slice(0, Math.max(0, limit));
      return due.map((r) => {
        const notification = { ...r.notification, attempts: r.notification.attempts + 1 };
        t.outbox.set(notification.id, { notification, claim, leaseUntil: copyDate(leaseUntil) });
        return copyNotification(notification);
      });
    });
  }

  async complete(id: string, claim: string, outcome: AttemptOutcome): Promise<boolean> {
    return this.session.write((t) => {
      const r = t.outbox.get(id);
      if (r === undefined || r.claim !== claim || r.notification.status !== 'pending') return false;
      const n = r.notification;
      const next: Notification =
        outcome.status === 'pending'
          ? { ...n, nextAttemptAt: copyDate(outcome.nextAttemptAt), lastError: outcome.error }
          : outcome.status === 'delivered'
            ? { ...n, status: 'delivered', completedAt: copyDate(outcome.at) }
            : { ...n, status: 'failed', completedAt: copyDate(outcome.at), lastError: outcome.error };
      t.outbox.set(id, { notification: next, claim: null, leaseUntil: null });
      return true;
    });
  }

  async release(id: string, claim: string): Promise<boolean> {
    return this.session.write((t) => {
      const r = t.outbox.get(id);
      if (r === undefined || r.claim !== claim || r.notification.status !== 'pending') return false;
      t.outbox.set(id, { notification: r.notification, claim: null, leaseUntil: null });
      return true;
    });
  }

  async findById(id: string): Promise<Notification | null> {
    return this.session.read((t) => {
      const r = t.outbox.get(id);
      return r === undefined ? null : copyNotification(r.notification);
    });
  }

  async list(filter: OutboxFilter, request: PageRequest): Promise<Notification[]> {
    const { organisationId, status } = filter;
    return this.session.read((t) =>
      page(
        [...t.outbox.values()]
          .map((r) => r.notification)
          .filter((n) => (organisationId === undefined || n.organisationId === organisationId) && (status === undefined || n.status === status)),
        (n) => n,
        request,
        copyNotification,
      ),
    );
  }

  async retry(id: string, now: Date): Promise<boolean> {
    const at = copyDate(now);
    return this.session.write((t) => {
      const r = t.outbox.get(id);
      if (r === undefined || r.notification.status === 'delivered') return false;
      const notification: Notification = { ...r.notification, status: 'pending', attempts: 0, nextAttemptAt: copyDate(at), completedAt: null };
      t.outbox.set(id, { notification, claim: null, leaseUntil: null });
      return true;
    });
  }

  async countPending(): Promise<number> {
    return this.session.read((t) => {
      let n = 0;
      for (const r of t.outbox.values()) if (r.notification.status === 'pending') n += 1;
      return n;
    });
  }

  async purgeCompleted(completedBefore: Date, limit: number): Promise<number> {
    const beforeMs = completedBefore.getTime();
    return this.session.write((t) => {
      const old = [...t.outbox.values()]
        .map((r) => r.notification)
        .filter((n) => n.status !== 'pending' && n.completedAt !== null && n.completedAt.getTime() < beforeMs)
        .sort((a, b) => compareKeyset(a.completedAt!.getTime(), a.id, b.completedAt!.getTime(), b.id))
        .slice(0, Math.max(0, Math.floor(limit)));
      for (const n of old) t.outbox.delete(n.id);
      return old.length;
    });
  }
}
