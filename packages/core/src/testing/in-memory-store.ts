/**
 * The in-memory store: a real implementation of every store port (not a mock), held to the same
 * contract suites as the SQL stores. Transactions work on a private copy of the tables; on commit
 * the transaction's writes are replayed, atomically, onto the then-current tables, so a failing
 * `run` leaves no trace and writes made outside the run meanwhile are kept. Runs are serialised.
 */
import { timingSafeEqual } from 'node:crypto';
import { digestsEqual, scopesOf, type ApiKey } from '../domain/api-key.js';
import type { KeyPolicy } from '../domain/key-policy.js';
import { sortedScopes } from '../domain/scopes.js';
import type { AuditActor, AuditEntry } from '../domain/audit.js';
import { linkAuditEntry, type AuditHead, type ChainedAuditEntry } from '../domain/audit-chain.js';
import { fullEndpoint, type Notification, type WebhookEndpoint } from '../domain/webhook.js';
import { ConflictError, uniqueConflict } from '../domain/errors.js';
import type { Member } from '../domain/member.js';
import type { Organisation } from '../domain/organisation.js';
import type { ApiKeyStore, Credential, KeyUse } from '../ports/api-key-store.js';
import type { AuditChainQuery, AuditFilter, AuditLog } from '../ports/audit-log.js';
import type { HealthProbe } from '../ports/health-probe.js';
import type { IdempotencyClaim, IdempotencyClaimRequest, IdempotencyRecord, IdempotencyStore, IdempotentResponse } from '../ports/idempotency-store.js';
import type { MemberStore } from '../ports/member-store.js';
import type { OrganisationChanges, OrganisationStore } from '../ports/organisation-store.js';
import type { AttemptOutcome, Outbox, OutboxFilter } from '../ports/outbox.js';
import type { WebhookStore } from '../ports/webhook-store.js';
import type { KeysetPosition, PageRequest } from '../ports/pagination.js';
import type { Stores, UnitOfWork, WorkDeclaration } from '../ports/unit-of-work.js';
import { assertCredentialChangeDeclared, declaredOrganisations } from '../access/credential-change.js';
import type { StoreHarness } from './harness.js';

interface Tables {
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
}

interface IdempotencyRow {
  readonly record: IdempotencyRecord;
  readonly token: string;
}

/** An outbox record with its claim (lease id and end), which the port never hands out. */
interface OutboxRow {
  readonly notification: Notification;
  readonly claim: string | null;
  readonly leaseUntil: Date | null;
}

/** A write: validates first, then mutates; throws before mutating anything. */
type Write<T> = (tables: Tables) => T;

function emptyTables(): Tables {
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
  };
}

/** Records are stored as private copies, so a shallow copy of each map is a full snapshot. */
function cloneTables(t: Tables): Tables {
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
  };
}

const copyDate = (d: Date): Date => new Date(d.getTime());
const copyDateOrNull = (d: Date | null): Date | null => (d === null ? null : copyDate(d));

function copyOrganisation(o: Organisation): Organisation {
  return {
    id: o.id,
    name: o.name,
    slug: o.slug,
    industrySection: o.industrySection,
    isSystem: o.isSystem,
    createdAt: copyDate(o.createdAt),
    updatedAt: copyDate(o.updatedAt),
  };
}

function copyMember(m: Member): Member {
  return { id: m.id, organisationId: m.organisationId, email: m.email, createdAt: copyDate(m.createdAt) };
}

function copyApiKey(k: ApiKey): ApiKey {
  return {
    id: k.id,
    organisationId: k.organisationId,
    label: k.label,
    keyPrefix: k.keyPrefix,
    digest: k.digest,
    expiresAt: copyDateOrNull(k.expiresAt),
    createdAt: copyDate(k.createdAt),
    revokedAt: copyDateOrNull(k.revokedAt),
    lastUsedAt: copyDateOrNull(k.lastUsedAt ?? null),
    rolledFromKeyId: k.rolledFromKeyId ?? null,
    scopes: sortedScopes(scopesOf(k)),
    createdByKeyId: k.createdByKeyId ?? null,
  };
}

function copyKeyPolicy(p: KeyPolicy): KeyPolicy {
  return { maxLifetimeSeconds: p.maxLifetimeSeconds, allowedEnvironments: [...p.allowedEnvironments], exposureResponse: p.exposureResponse };
}

function copyActor(a: AuditActor): AuditActor {
  if (a.type === 'api_key') return { type: 'api_key', keyId: a.keyId };
  if (a.type === 'operator') return a.name !== undefined ? { type: 'operator', name: a.name } : { type: 'operator' };
  return { type: a.type };
}

function copyWebhook(w: WebhookEndpoint): WebhookEndpoint {
  const full = fullEndpoint(w);
  return {
    organisationId: w.organisationId,
    url: w.url,
    secret: w.secret,
    createdAt: copyDate(w.createdAt),
    updatedAt: copyDate(w.updatedAt),
    events: [...full.events],
    enabled: full.enabled,
    previousSecret: full.previousSecret,
    previousSecretExpiresAt: copyDateOrNull(full.previousSecretExpiresAt),
  };
}

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

function copyAudit(e: ChainedAuditEntry): ChainedAuditEntry {
  return {
    ...copyEntry(e),
    seq: e.seq,
    prevHash: e.prevHash,
    hash: e.hash,
  };
}

function copyEntry(e: AuditEntry): AuditEntry {
  return {
    id: e.id,
    kind: e.kind,
    occurredAt: copyDate(e.occurredAt),
    organisationId: e.organisationId,
    keyId: e.keyId,
    keyPrefix: e.keyPrefix,
    actor: copyActor(e.actor),
    ...(e.exposure !== undefined ? { exposure: { type: e.exposure.type, url: e.exposure.url, source: e.exposure.source } } : {}),
    ...(e.member !== undefined ? { member: { id: e.member.id } } : {}),
    ...(e.roll !== undefined ? { roll: { toKeyId: e.roll.toKeyId, gracePeriodSeconds: e.roll.gracePeriodSeconds } } : {}),
    ...(e.webhook !== undefined ? { webhook: { origin: e.webhook.origin } } : {}),
    ...(e.notification !== undefined ? { notification: { id: e.notification.id, type: e.notification.type } } : {}),
    ...(e.descendantKeyIds !== undefined ? { descendantKeyIds: [...e.descendantKeyIds] } : {}),
    ...(e.keyPolicy !== undefined ? { keyPolicy: { old: copyKeyPolicy(e.keyPolicy.old), new: copyKeyPolicy(e.keyPolicy.new) } } : {}),
  };
}

/** Order by (time, id) ascending; ids compare by code unit, as a binary collation would. */
function compareKeyset(aMs: number, aId: string, bMs: number, bId: string): number {
  if (aMs !== bMs) return aMs < bMs ? -1 : 1;
  return aId < bId ? -1 : aId > bId ? 1 : 0;
}

function page<T>(records: Iterable<T>, position: (r: T) => KeysetPosition, request: PageRequest, copy: (r: T) => T): T[] {
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

function duplicateId(what: string): ConflictError {
  return uniqueConflict('id', what);
}

/** Where the stores read and write: the shared tables directly, or a transaction's copy. */
interface Session {
  read<T>(fn: (tables: Tables) => T): T;
  write<T>(op: Write<T>): T;
  /** Before a credential-affecting write: throws inside a unit of work that did not declare the organisation. */
  credentialWrite(organisationId: string, write: string): void;
}

class Database {
  tables: Tables = emptyTables();
  closed = false;
  #queue: Promise<void> = Promise.resolve();

  checkOpen(): void {
    if (this.closed) throw new Error('The in-memory store is closed');
  }

  /** Serialises units of work: resolves with a release function once every earlier run is done. */
  async acquire(): Promise<() => void> {
    let release!: () => void;
    const next = new Promise<void>((resolve) => (release = resolve));
    const previous = this.#queue;
    this.#queue = previous.then(() => next);
    await previous;
    return release;
  }
}

class AutoCommitSession implements Session {
  constructor(private readonly db: Database) {}

  read<T>(fn: (tables: Tables) => T): T {
    this.db.checkOpen();
    return fn(this.db.tables);
  }

  write<T>(op: Write<T>): T {
    this.db.checkOpen();
    return op(this.db.tables);
  }

  /** Outside a unit of work each call is its own transaction: nothing to declare. */
  credentialWrite(): void {}
}

class TransactionSession implements Session {
  readonly #db: Database;
  readonly #working: Tables;
  readonly #log: Array<Write<unknown>> = [];
  #finished = false;

  readonly #declared: ReadonlySet<string>;

  constructor(db: Database, declared: ReadonlySet<string>) {
    this.#db = db;
    this.#working = cloneTables(db.tables);
    this.#declared = declared;
  }

  credentialWrite(organisationId: string, write: string): void {
    this.#check();
    assertCredentialChangeDeclared(this.#declared, organisationId, write);
  }

  #check(): void {
    this.#db.checkOpen();
    if (this.#finished) throw new Error('This unit of work has already finished');
  }

  read<T>(fn: (tables: Tables) => T): T {
    this.#check();
    return fn(this.#working);
  }

  write<T>(op: Write<T>): T {
    this.#check();
    const result = op(this.#working);
    this.#log.push(op);
    return result;
  }

  /** Replays the writes onto a copy of the current tables, then swaps: all or nothing. */
  commit(): void {
    this.#check();
    this.#finished = true;
    const next = cloneTables(this.#db.tables);
    for (const op of this.#log) op(next);
    this.#db.tables = next;
  }

  abandon(): void {
    this.#finished = true;
  }
}

class InMemoryOrganisationStore implements OrganisationStore {
  constructor(private readonly session: Session) {}

  async create(organisation: Organisation): Promise<void> {
    const record = copyOrganisation(organisation);
    this.session.write((t) => {
      if (t.organisations.has(record.id)) throw duplicateId('Organisation');
      for (const o of t.organisations.values()) {
        if (o.slug === record.slug) {
          throw uniqueConflict('slug');
        }
      }
      t.organisations.set(record.id, record);
    });
  }

  async findById(id: string): Promise<Organisation | null> {
    return this.session.read((t) => {
      const o = t.organisations.get(id);
      return o === undefined ? null : copyOrganisation(o);
    });
  }

  async findFirstSystem(): Promise<Organisation | null> {
    return this.session.read((t) => {
      const [first] = page(
        [...t.organisations.values()].filter((o) => o.isSystem),
        (o) => o,
        { limit: 1, after: null },
        copyOrganisation,
      );
      return first ?? null;
    });
  }

  async update(id: string, changes: OrganisationChanges): Promise<Organisation | null> {
    const name = changes.name;
    const industrySection = changes.industrySection;
    const updatedAt = copyDate(changes.updatedAt);
    this.session.credentialWrite(id, 'organisations.update');
    return this.session.write((t) => {
      const current = t.organisations.get(id);
      if (current === undefined) return null;
      const next: Organisation = {
        ...current,
        ...(name !== undefined ? { name } : {}),
        ...(industrySection !== undefined ? { industrySection } : {}),
        updatedAt: copyDate(updatedAt),
      };
      t.organisations.set(id, next);
      return copyOrganisation(next);
    });
  }

  async list(request: PageRequest): Promise<Organisation[]> {
    return this.session.read((t) => page(t.organisations.values(), (o) => o, request, copyOrganisation));
  }

  async findKeyPolicy(organisationId: string): Promise<KeyPolicy | null> {
    return this.session.read((t) => {
      const p = t.keyPolicies.get(organisationId);
      return p === undefined ? null : copyKeyPolicy(p);
    });
  }

  async putKeyPolicy(organisationId: string, policy: KeyPolicy, _at: Date): Promise<void> {
    this.session.credentialWrite(organisationId, 'organisations.putKeyPolicy');
    const record = copyKeyPolicy(policy);
    this.session.write((t) => {
      if (!t.organisations.has(organisationId)) throw new Error('key policy for an organisation that does not exist');
      t.keyPolicies.set(organisationId, record);
    });
  }
}

class InMemoryMemberStore implements MemberStore {
  constructor(private readonly session: Session) {}

  async add(member: Member): Promise<void> {
    const record = copyMember(member);
    const email = record.email.toLowerCase();
    this.session.write((t) => {
      if (t.members.has(record.id)) throw duplicateId('Member');
      for (const m of t.members.values()) {
        if (m.organisationId === record.organisationId && m.email.toLowerCase() === email) {
          throw uniqueConflict('email');
        }
      }
      t.members.set(record.id, record);
    });
  }

  async find(organisationId: string, memberId: string): Promise<Member | null> {
    return this.session.read((t) => {
      const m = t.members.get(memberId);
      return m === undefined || m.organisationId !== organisationId ? null : copyMember(m);
    });
  }

  async remove(organisationId: string, memberId: string): Promise<boolean> {
    return this.session.write((t) => {
      const m = t.members.get(memberId);
      if (m === undefined || m.organisationId !== organisationId) return false;
      t.members.delete(memberId);
      return true;
    });
  }

  async list(organisationId: string, request: PageRequest): Promise<Member[]> {
    return this.session.read((t) =>
      page(
        [...t.members.values()].filter((m) => m.organisationId === organisationId),
        (m) => m,
        request,
        copyMember,
      ),
    );
  }
}

class InMemoryApiKeyStore implements ApiKeyStore {
  constructor(private readonly session: Session) {}

  async insert(key: ApiKey): Promise<void> {
    const record = { ...copyApiKey(key), lastUsedAt: null };
    this.session.write((t) => {
      if (t.apiKeys.has(record.id)) throw duplicateId('API key');
      for (const k of t.apiKeys.values()) {
        if (digestsEqual(k.digest, record.digest)) {
          throw uniqueConflict('digest');
        }
        if (record.rolledFromKeyId !== null && k.rolledFromKeyId === record.rolledFromKeyId) {
          throw uniqueConflict('rolled_key');
        }
      }
      t.apiKeys.set(record.id, record);
    });
  }

  async findById(organisationId: string, keyId: string): Promise<ApiKey | null> {
    return this.session.read((t) => {
      const k = t.apiKeys.get(keyId);
      return k === undefined || k.organisationId !== organisationId ? null : copyApiKey(k);
    });
  }

  async findCredential(digest: string): Promise<Credential | null> {
    return this.session.read((t) => {
      for (const k of t.apiKeys.values()) {
        // Constant-time, like every digest comparison (C-31), even in this in-memory adapter.
        if (!digestsEqual(k.digest, digest)) continue;
        const organisation = t.organisations.get(k.organisationId);
        if (organisation === undefined) return null;
        return { key: copyApiKey(k), organisation: copyOrganisation(organisation) };
      }
      return null;
    });
  }

  async list(organisationId: string, request: PageRequest): Promise<ApiKey[]> {
    return this.session.read((t) =>
      page(
        [...t.apiKeys.values()].filter((k) => k.organisationId === organisationId),
        (k) => k,
        request,
        copyApiKey,
      ),
    );
  }

  async countActive(organisationId: string, now: Date): Promise<number> {
    const nowMs = now.getTime();
    return this.session.read((t) => {
      let n = 0;
      for (const k of t.apiKeys.values()) {
        if (k.organisationId !== organisationId || k.revokedAt !== null) continue;
        if (k.expiresAt !== null && k.expiresAt.getTime() <= nowMs) continue;
        n += 1;
      }
      return n;
    });
  }

  async revoke(organisationId: string, keyId: string, at: Date): Promise<boolean> {
    const revokedAt = copyDate(at);
    this.session.credentialWrite(organisationId, 'apiKeys.revoke');
    return this.session.write((t) => {
      const k = t.apiKeys.get(keyId);
      if (k === undefined || k.organisationId !== organisationId || k.revokedAt !== null) return false;
      t.apiKeys.set(keyId, { ...k, revokedAt: copyDate(revokedAt) });
      return true;
    });
  }

  async shortenExpiry(organisationId: string, keyId: string, expiresAt: Date, now: Date): Promise<boolean> {
    const target = expiresAt.getTime();
    const nowMs = now.getTime();
    this.session.credentialWrite(organisationId, 'apiKeys.shortenExpiry');
    return this.session.write((t) => {
      const k = t.apiKeys.get(keyId);
      if (k === undefined || k.organisationId !== organisationId || k.revokedAt !== null) return false;
      const current = k.expiresAt === null ? Number.POSITIVE_INFINITY : k.expiresAt.getTime();
      if (current <= nowMs || current <= target) return false;
      t.apiKeys.set(keyId, { ...k, expiresAt: new Date(target) });
      return true;
    });
  }

  async recordUses(uses: readonly KeyUse[]): Promise<void> {
    const latest = new Map<string, number>();
    for (const u of uses) latest.set(u.keyId, Math.max(latest.get(u.keyId) ?? Number.NEGATIVE_INFINITY, u.at.getTime()));
    this.session.write((t) => {
      for (const [keyId, ms] of latest) {
        const k = t.apiKeys.get(keyId);
        if (k === undefined || (k.lastUsedAt != null && k.lastUsedAt.getTime() >= ms)) continue;
        t.apiKeys.set(keyId, { ...k, lastUsedAt: new Date(ms) });
      }
    });
  }

  async listCreatedBy(organisationId: string, createdByKeyId: string): Promise<ApiKey[]> {
    return this.session.read((t) =>
      page(
        [...t.apiKeys.values()].filter((k) => k.organisationId === organisationId && k.createdByKeyId === createdByKeyId),
        (k) => k,
        { limit: Number.MAX_SAFE_INTEGER, after: null },
        copyApiKey,
      ),
    );
  }

  async recordExposure(keyId: string, url: string | null, _at: Date): Promise<boolean> {
    const entry = `${keyId} ${url ?? ''}`;
    return this.session.write((t) => {
      if (t.exposures.has(entry)) return false;
      t.exposures.add(entry);
      return true;
    });
  }
}

class InMemoryWebhookStore implements WebhookStore {
  constructor(private readonly session: Session) {}

  async get(organisationId: string): Promise<WebhookEndpoint | null> {
    return this.session.read((t) => {
      const w = t.webhooks.get(organisationId);
      return w === undefined ? null : copyWebhook(w);
    });
  }

  async put(endpoint: WebhookEndpoint): Promise<void> {
    const record = copyWebhook(endpoint);
    this.session.write((t) => {
      if (!t.organisations.has(record.organisationId)) throw new Error('webhook for an organisation that does not exist');
      t.webhooks.set(record.organisationId, record);
    });
  }

  async remove(organisationId: string): Promise<boolean> {
    return this.session.write((t) => t.webhooks.delete(organisationId));
  }

  async listAfter(afterOrganisationId: string | null, limit: number): Promise<WebhookEndpoint[]> {
    return this.session.read((t) =>
      [...t.webhooks.values()]
        .filter((w) => afterOrganisationId === null || w.organisationId > afterOrganisationId)
        .sort((a, b) => (a.organisationId < b.organisationId ? -1 : a.organisationId > b.organisationId ? 1 : 0))
        .slice(0, Math.max(0, limit))
        .map(copyWebhook),
    );
  }

  async replaceSecret(organisationId: string, expected: string, next: string): Promise<boolean> {
    return this.session.write((t) => {
      const w = t.webhooks.get(organisationId);
      if (w === undefined || !sameSecret(w.secret, expected)) return false;
      t.webhooks.set(organisationId, { ...w, secret: next });
      return true;
    });
  }
}

class InMemoryOutbox implements Outbox {
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

class InMemoryAuditLog implements AuditLog {
  constructor(private readonly session: Session) {}

  /** Linked when the write is applied (again at commit, onto the then-current head). */
  async append(entry: AuditEntry): Promise<ChainedAuditEntry> {
    const input = copyEntry(entry);
    const stored = this.session.write((t) => {
      if (t.audit.has(input.id)) throw duplicateId('Audit entry');
      const record = linkAuditEntry(input, t.auditHeads.get(input.organisationId) ?? null);
      t.audit.set(record.id, record);
      t.auditHeads.set(record.organisationId, { organisationId: record.organisationId, seq: record.seq, hash: record.hash });
      return record;
    });
    return copyAudit(stored);
  }

  async list(filter: AuditFilter, request: PageRequest): Promise<ChainedAuditEntry[]> {
    const { organisationId, kind } = filter;
    return this.session.read((t) =>
      page(
        [...t.audit.values()].filter(
          (e) => (organisationId === undefined || e.organisationId === organisationId) && (kind === undefined || e.kind === kind),
        ),
        (e) => ({ createdAt: e.occurredAt, id: e.id }),
        request,
        copyAudit,
      ),
    );
  }

  async chain(organisationId: string, q: AuditChainQuery): Promise<ChainedAuditEntry[]> {
    const since = q.since?.getTime();
    const until = q.until?.getTime();
    return this.session.read((t) =>
      [...t.audit.values()]
        .filter(
          (e) =>
            e.organisationId === organisationId &&
            e.seq > q.afterSeq &&
            (q.kind === undefined || e.kind === q.kind) &&
            (since === undefined || e.occurredAt.getTime() >= since) &&
            (until === undefined || e.occurredAt.getTime() < until),
        )
        .sort((a, b) => a.seq - b.seq)
        .slice(0, Math.max(0, q.limit))
        .map(copyAudit),
    );
  }

  async heads(): Promise<AuditHead[]> {
    return this.session.read((t) =>
      [...t.auditHeads.values()]
        .sort((a, b) => (a.organisationId < b.organisationId ? -1 : a.organisationId > b.organisationId ? 1 : 0))
        .map((h) => ({ ...h })),
    );
  }
}

const idempotencyId = (organisationId: string, key: string): string => `${organisationId} ${key}`;

function copyIdempotentResponse(r: IdempotentResponse): IdempotentResponse {
  return { status: r.status, headers: { ...r.headers }, body: r.body };
}

function copyIdempotencyRecord(r: IdempotencyRecord): IdempotencyRecord {
  return {
    organisationId: r.organisationId,
    key: r.key,
    fingerprint: r.fingerprint,
    createdAt: copyDate(r.createdAt),
    expiresAt: copyDate(r.expiresAt),
    lockedUntil: copyDate(r.lockedUntil),
    response: r.response === null ? null : copyIdempotentResponse(r.response),
  };
}

class InMemoryIdempotencyStore implements IdempotencyStore {
  constructor(private readonly session: Session) {}

  async claim(request: IdempotencyClaimRequest): Promise<IdempotencyClaim> {
    return this.session.write((t): IdempotencyClaim => {
      const id = idempotencyId(request.organisationId, request.key);
      const existing = t.idempotency.get(id);
      const now = request.now.getTime();
      const free =
        existing === undefined ||
        existing.record.expiresAt.getTime() <= now ||
        (existing.record.response === null && existing.record.lockedUntil.getTime() <= now);
      if (!free) return { kind: 'existing', record: copyIdempotencyRecord(existing.record) };
      const record: IdempotencyRecord = {
        organisationId: request.organisationId,
        key: request.key,
        fingerprint: request.fingerprint,
        createdAt: copyDate(request.now),
        expiresAt: copyDate(request.expiresAt),
        lockedUntil: copyDate(request.lockedUntil),
        response: null,
      };
      t.idempotency.set(id, { record, token: request.token });
      return { kind: 'claimed' };
    });
  }

  async complete(organisationId: string, key: string, token: string, response: IdempotentResponse): Promise<boolean> {
    return this.session.write((t) => {
      const id = idempotencyId(organisationId, key);
      const row = t.idempotency.get(id);
      if (row === undefined || row.token !== token || row.record.response !== null) return false;
      t.idempotency.set(id, { token, record: { ...row.record, response: copyIdempotentResponse(response) } });
      return true;
    });
  }

  async release(organisationId: string, key: string, token: string): Promise<boolean> {
    return this.session.write((t) => {
      const id = idempotencyId(organisationId, key);
      const row = t.idempotency.get(id);
      if (row === undefined || row.token !== token || row.record.response !== null) return false;
      return t.idempotency.delete(id);
    });
  }

  async sweep(now: Date): Promise<number> {
    return this.session.write((t) => {
      let n = 0;
      for (const [id, row] of t.idempotency) {
        if (row.record.expiresAt.getTime() <= now.getTime()) {
          t.idempotency.delete(id);
          n += 1;
        }
      }
      return n;
    });
  }
}

function storesOver(session: Session): Stores {
  return Object.freeze({
    organisations: new InMemoryOrganisationStore(session),
    members: new InMemoryMemberStore(session),
    apiKeys: new InMemoryApiKeyStore(session),
    audit: new InMemoryAuditLog(session),
    webhooks: new InMemoryWebhookStore(session),
    outbox: new InMemoryOutbox(session),
    idempotency: new InMemoryIdempotencyStore(session),
  });
}

class InMemoryUnitOfWork implements UnitOfWork {
  constructor(private readonly db: Database) {}

  async run<T>(work: (stores: Stores) => Promise<T>, declaration?: WorkDeclaration): Promise<T> {
    const declared = declaredOrganisations(declaration);
    this.db.checkOpen();
    const release = await this.db.acquire();
    try {
      this.db.checkOpen();
      const session = new TransactionSession(this.db, declared);
      try {
        const result = await work(storesOver(session));
        session.commit();
        return result;
      } catch (error) {
        session.abandon();
        throw error;
      }
    } finally {
      release();
    }
  }
}

class InMemoryHealthProbe implements HealthProbe {
  constructor(private readonly db: Database) {}

  async ping(): Promise<void> {
    this.db.checkOpen();
  }
}

/**
 * A fresh, empty, transactional in-memory store. `unitOfWork.run` rolls back on throw and runs
 * one at a time; after `close()` every call rejects.
 */
export function createInMemoryStore(): StoreHarness {
  const db = new Database();
  return {
    stores: storesOver(new AutoCommitSession(db)),
    unitOfWork: new InMemoryUnitOfWork(db),
    health: new InMemoryHealthProbe(db),
    close: async () => {
      db.closed = true;
    },
  };
}

/** A stored secret compared in constant time (C-31), as the SQL stores compare it in the database. */
function sameSecret(a: string, b: string): boolean {
  const ba = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  return ba.length === bb.length && timingSafeEqual(ba, bb);
}
