/** The in-memory store's tables, the copies its records are stored and handed out as, and keyset paging. */
import type { ApiKey } from '../domain/api-key.js';
import type { KeyPolicy } from '../domain/key-policy.js';
import type { AuditedKeyPolicy } from '../domain/audit.js';
import type { AuditHead, ChainedAuditEntry } from '../domain/audit-chain.js';
import type { Notification, WebhookEndpoint } from '../domain/webhook.js';
import { ConflictError, uniqueConflict } from '../domain/errors.js';
import type { Member } from '../domain/member.js';
import type { Organisation } from '../domain/organisation.js';
import type { IdempotencyRecord } from '../ports/idempotency-store.js';
import type { KeysetPosition, PageRequest } from '../ports/pagination.js';

export interface Tables {
  readonly organisations: Map<string, Organisation>;
  readonly members: Map<string, Member>;
  readonly apiKeys: Map<string, ApiKey>;
  readonly audit: Map<string, ChainedAuditEntry>;
  /** Each organisation's last audit entry (C-63): where the next one links. */
  readonly auditHeads: Map<string, AuditHead>;
  readonly webhooks: Map<string, WebhookEndpoint>;
  readonly outbox: Map<string, OutboxRow>;
  /** `${keyId} ${url ?? ''}` of every recorded exposure. */
  readonly exposures: Set<string>;
  /** Organisation id -> its key policy (none: the default applies). */
  readonly keyPolicies: Map<string, KeyPolicy>;
  /** Idempotency records by `${organisationId} ${key}`, with the token of their claim. */
  readonly idempotency: Map<string, IdempotencyRow>;
  /** Usage counts by `${keyId} ${hourStartMs}`. */
  readonly usage: Map<string, UsageRow>;
  /** Key id -> when its expiry notice was recorded as sent. */
  readonly expiryNotices: Map<string, Date>;
}

/** One key's counts for one hour (replaced, never mutated, so a shallow copy of the map is a snapshot). */
export interface UsageRow {
  readonly keyId: string;
  readonly organisationId: string;
  readonly hourMs: number;
  readonly requests: number;
  readonly rateLimited: number;
}

interface IdempotencyRow {
  readonly record: IdempotencyRecord;
  readonly token: string;
}

/** An outbox record with its claim (lease id and end), which the port never hands out. */
export interface OutboxRow {
  readonly notification: Notification;
  readonly claim: string | null;
  readonly leaseUntil: Date | null;
}

/** A write: validates first, then mutates; throws before mutating anything. */
export type Write<T> = (tables: Tables) => T;

export function emptyTables(): Tables {
  return {
    organisations: new Map(),
    members: new Map(),
    apiKeys: new Map(),
    audit: new Map(),
    auditHeads: new Map(),
    webhooks: new Map(),
    outbox: new Map(),
    exposures: new Set(),
    keyPolicies: new Map(),
    idempotency: new Map(),
    usage: new Map(),
    expiryNotices: new Map(),
  };
}

/** Records are stored as private copies, so a shallow copy of each map is a full snapshot. */
export function cloneTables(t: Tables): Tables {
  return {
    organisations: new Map(t.organisations),
    members: new Map(t.members),
    apiKeys: new Map(t.apiKeys),
    audit: new Map(t.audit),
    auditHeads: new Map(t.auditHeads),
    webhooks: new Map(t.webhooks),
    outbox: new Map(t.outbox),
    exposures: new Set(t.exposures),
    keyPolicies: new Map(t.keyPolicies),
    idempotency: new Map(t.idempotency),
    usage: new Map(t.usage),
    expiryNotices: new Map(t.expiryNotices),
  };
}

export const copyDate = (d: Date): Date => new Date(d.getTime());
export const copyDateOrNull = (d: Date | null): Date | null => (d === null ? null : copyDate(d));

export function copyOrganisation(o: Organisation): Organisation {
  return {
    id: o.id,
    name: o.name,
    slug: o.slug,
    industrySection: o.industrySection,
    isSystem: o.isSystem,
    rateLimitPerMinute: o.rateLimitPerMinute,
    createdAt: copyDate(o.createdAt),
    updatedAt: copyDate(o.updatedAt),
  };
}

export function copyKeyPolicy(p: KeyPolicy): KeyPolicy {
  return { ...copyAuditedKeyPolicy(p), expiryNoticeSeconds: p.expiryNoticeSeconds };
}

/** A policy as an audit entry holds it: `expiryNoticeSeconds` only when the entry has it. */
export function copyAuditedKeyPolicy(p: AuditedKeyPolicy): AuditedKeyPolicy {
  return {
    maxLifetimeSeconds: p.maxLifetimeSeconds,
    allowedEnvironments: [...p.allowedEnvironments],
    exposureResponse: p.exposureResponse,
    ...(p.expiryNoticeSeconds !== undefined ? { expiryNoticeSeconds: p.expiryNoticeSeconds } : {}),
  };
}

/** Order by (time, id) ascending; ids compare by code unit, as a binary collation would. */
export function compareKeyset(aMs: number, aId: string, bMs: number, bId: string): number {
  if (aMs !== bMs) return aMs < bMs ? -1 : 1;
  return aId < bId ? -1 : aId > bId ? 1 : 0;
}

export function page<T>(records: Iterable<T>, position: (r: T) => KeysetPosition, request: PageRequest, copy: (r: T) => T): T[] {
  const after = request.after;
  const sorted = [...records]
    .filter((r) => {
      if (after === null) return true;
      const p = position(r);
      return compareKeyset(p.createdAt.getTime(), p.id, after.createdAt.getTime(), after.id) > 0;
    })
    .sort((a, b) => {
      const pa = position(a);
      const pb = position(b);
      return compareKeyset(pa.createdAt.getTime(), pa.id, pb.createdAt.getTime(), pb.id);
    });
  return sorted.slice(0, Math.max(0, request.limit)).map(copy);
}

export function duplicateId(what: string): ConflictError {
  return uniqueConflict('id', what);
}
