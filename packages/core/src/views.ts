/**
 * The contract's JSON shapes (C-20..C-22, C-40): snake_case, ISO 8601 UTC timestamps with
 * milliseconds and a trailing Z. Shared by the HTTP adapter and the CLI's --json output.
 */
import type { ApiKey, KeyEnvironment, KeyStatus } from './domain/api-key.js';
import { keyStatus, metadataOf, scopesOf } from './domain/api-key.js';
import type { ExposureResponse, KeyPolicy } from './domain/key-policy.js';
import type { AuditActor, AuditEntry, AuditedKeyPolicy } from './domain/audit.js';
import type { ChainedAuditEntry } from './domain/audit-chain.js';
import type { Member } from './domain/member.js';
import { fullEndpoint, type Notification, type WebhookEndpoint } from './domain/webhook.js';
import type { NaceSection, Organisation } from './domain/organisation.js';
import type { IssuedKey } from './operations/api-keys.js';
import type { Page } from './operations/page.js';
import type { OrganisationRateLimit } from './operations/rate-limits.js';
import type { UsageBucket } from './ports/usage-store.js';

export interface OrganisationView {
  id: string;
  name: string;
  slug: string;
  industry_section: NaceSection | null;
  is_system: boolean;
  created_at: string;
  updated_at: string;
}

export interface MemberView {
  id: string;
  organisation_id: string;
  email: string;
  created_at: string;
}

export interface ApiKeyView {
  id: string;
  organisation_id: string;
  label: string;
  key_prefix: string;
  is_active: boolean;
  status: KeyStatus;
  expires_at: string | null;
  created_at: string;
  revoked_at: string | null;
  /** Last successful authentication, accurate to 60 s; null when never used. */
  last_used_at: string | null;
  /** The key this one replaced through a roll, or null. */
  rolled_from: string | null;
  /** What the key may do (C-60): sorted, without duplicates; fixed at issue. */
  scopes: string[];
  /** The key that issued or rolled this one, or null when an operator did (C-61). */
  created_by_key_id: string | null;
  /** Free-form string labels (C-260); `{}` when none. */
  metadata: Record<string, string>;
  /** The networks requests with the key may come from (C-262); null: any address. */
  allowed_cidrs: string[] | null;
  /** The key's own limit per minute (C-290), counted besides its organisation's; null: none. */
  rate_limit_per_minute: number | null;
}

/** An organisation's key policy (C-62), as GET/PUT .../key-policy answer it. */
export interface KeyPolicyView {
  max_lifetime_seconds: number | null;
  allowed_environments: KeyEnvironment[];
  exposure_response: ExposureResponse;
  expiry_notice_seconds: number;
}

/** A key policy as an audit entry recorded it (entries older than expiry notices lack that field). */
export type AuditedKeyPolicyView = Omit<KeyPolicyView, 'expiry_notice_seconds'> & { expiry_notice_seconds?: number };

export interface IssuedKeyView extends ApiKeyView {
  /** The raw key: only ever in the issuance response. */
  key: string;
}

/** The operator's `name` is there when one was recorded (additive, C-56). */
export type AuditActorView = { type: 'api_key'; key_id: string } | { type: 'operator'; name?: string } | { type: 'secret_scanning' };

/** Where an exposed key was found (`api_key_exposed` entries only). */
export interface KeyExposureView {
  type: string;
  url: string | null;
  source: string | null;
}

/** What a roll did (`api_key_rolled` entries only). */
export interface KeyRollView {
  to_key_id: string;
  grace_period_seconds: number;
}

export interface AuditEntryView {
  id: string;
  kind: AuditEntry['kind'];
  occurred_at: string;
  organisation_id: string;
  key_id: string | null;
  key_prefix: string | null;
  actor: AuditActorView;
  /** Present on `api_key_exposed` entries only. */
  exposure?: KeyExposureView;
  /** Present on `member_added` / `member_removed` entries only: the member by id (never an e-mail address, C-63). */
  member?: { id: string };
  /** Present on `api_key_rolled` entries only. */
  roll?: KeyRollView;
  /** Present on `webhook_endpoint_set` / `webhook_endpoint_removed` / `webhook_secret_rotated` entries only: the URL's origin. */
  webhook?: { origin: string };
  /** Present on `notification_retried` entries only. */
  notification?: { id: string; type: string };
  /** Present on `api_key_exposed` entries written since key lineage (C-61): the exposed key's active descendants. */
  descendant_key_ids?: string[];
  /** Present on `organisation_policy_updated` entries only (C-62). */
  key_policy?: { old: AuditedKeyPolicyView; new: AuditedKeyPolicyView };
  /** Present on `organisation_rate_limit_changed` entries only: requests per minute before and after (null: the default). */
  rate_limit?: { old: number | null; new: number | null };
  /** Present on `api_key_updated` entries only: the names of the fields changed. */
  changed_fields?: string[];
  /** Present on `api_key_issued` entries of a restricted key and `api_key_updated` entries that changed it (null: any address). */
  allowed_cidrs?: string[] | null;
  /** The entry's place in its organisation's hash chain (C-63). */
  seq: number;
  prev_hash: string;
  hash: string;
}

/** An organisation's webhook endpoint: never its secret, except `secret` once after it was made. */
export interface WebhookView {
  organisation_id: string;
  url: string;
  /** `["*"]` (every event) or the event types it is subscribed to. */
  events: string[];
  /** False: nothing is written to the outbox for it (a ping still is). */
  enabled: boolean;
  created_at: string;
  updated_at: string;
  secret?: string;
}

/** One outbox record (C-59): its payload is the body sent, which holds no key material. */
export interface NotificationView {
  id: string;
  organisation_id: string;
  type: Notification['type'];
  status: Notification['status'];
  attempts: number;
  next_attempt_at: string | null;
  created_at: string;
  completed_at: string | null;
  last_error: string | null;
  payload: unknown;
}

export interface ListView<T> {
  data: T[];
  meta: { next_cursor: string | null };
}

const pad2 = (n: number): string => (n < 10 ? `0${n}` : `${n}`);
const pad3 = (n: number): string => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/**
 * `Date.prototype.toISOString` for years 1000-9999, a third of its cost (it is on every response of
 * the authentication hot path); other years, and invalid dates (which throw), go to the builtin.
 */
export function isoTimestamp(d: Date): string {
  const year = d.getUTCFullYear();
  if (!(year >= 1000 && year <= 9999)) return d.toISOString();
  return `${year}-${pad2(d.getUTCMonth() + 1)}-${pad2(d.getUTCDate())}T${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}:${pad2(d.getUTCSeconds())}.${pad3(d.getUTCMilliseconds())}Z`;
}
const isoOrNull = (d: Date | null): string | null => (d === null ? null : isoTimestamp(d));

export function organisationView(o: Organisation): OrganisationView {
  return {
    id: o.id,
    name: o.name,
    slug: o.slug,
    industry_section: o.industrySection,
    is_system: o.isSystem,
    created_at: isoTimestamp(o.createdAt),
    updated_at: isoTimestamp(o.updatedAt),
  };
}

/**
 * `JSON.stringify(organisationView(o))`, byte for byte, without building the view object first: the
 * body of GET /v1/organisations/{id}, the hot path of the embedded service (bench scenario (a)),
 * serialised afresh on every request at about half the cost (nothing is cached; the figures are in
 * docs/performance.md). Strings
 * go through JSON.stringify itself, so escaping is JSON's; the timestamps need none.
 */
export function organisationJson(o: Organisation): string {
  const section = o.industrySection === null ? 'null' : JSON.stringify(o.industrySection);
  return `{"id":${JSON.stringify(o.id)},"name":${JSON.stringify(o.name)},"slug":${JSON.stringify(o.slug)},"industry_section":${section},"is_system":${o.isSystem ? 'true' : 'false'},"created_at":"${isoTimestamp(o.createdAt)}","updated_at":"${isoTimestamp(o.updatedAt)}"}`;
}

export function memberView(m: Member): MemberView {
  return { id: m.id, organisation_id: m.organisationId, email: m.email, created_at: isoTimestamp(m.createdAt) };
}

/** Never includes the digest (C-22). */
export function apiKeyView(k: ApiKey, now: Date): ApiKeyView {
  const status = keyStatus(k, now);
  return {
    id: k.id,
    organisation_id: k.organisationId,
    label: k.label,
    key_prefix: k.keyPrefix,
    is_active: status === 'active',
    status,
    expires_at: isoOrNull(k.expiresAt),
    created_at: isoTimestamp(k.createdAt),
    revoked_at: isoOrNull(k.revokedAt),
    last_used_at: isoOrNull(k.lastUsedAt ?? null),
    rolled_from: k.rolledFromKeyId ?? null,
    scopes: [...scopesOf(k)],
    created_by_key_id: k.createdByKeyId ?? null,
    metadata: { ...metadataOf(k) },
    allowed_cidrs: k.allowedCidrs == null ? null : [...k.allowedCidrs],
    rate_limit_per_minute: k.rateLimitPerMinute ?? null,
  };
}

/** GET/PUT /v1/organisations/{org_id}/rate-limit. */
export interface RateLimitView {
  requests_per_minute: number;
  source: 'organisation' | 'default';
}

export function rateLimitView(r: OrganisationRateLimit): RateLimitView {
  return { requests_per_minute: r.requestsPerMinute, source: r.source };
}

export function keyPolicyView(p: KeyPolicy): KeyPolicyView {
  return { ...auditedKeyPolicyView(p), expiry_notice_seconds: p.expiryNoticeSeconds };
}

function auditedKeyPolicyView(p: AuditedKeyPolicy): AuditedKeyPolicyView {
  return {
    max_lifetime_seconds: p.maxLifetimeSeconds,
    allowed_environments: [...p.allowedEnvironments],
    exposure_response: p.exposureResponse,
    ...(p.expiryNoticeSeconds !== undefined ? { expiry_notice_seconds: p.expiryNoticeSeconds } : {}),
  };
}

export function issuedKeyView(issued: IssuedKey, now: Date): IssuedKeyView {
  return { ...apiKeyView(issued.key, now), key: issued.rawKey };
}

export function auditEntryView(e: ChainedAuditEntry): AuditEntryView {
  return {
    id: e.id,
    kind: e.kind,
    occurred_at: isoTimestamp(e.occurredAt),
    organisation_id: e.organisationId,
    key_id: e.keyId,
    key_prefix: e.keyPrefix,
    actor: auditActorView(e.actor),
    ...(e.exposure !== undefined ? { exposure: { type: e.exposure.type, url: e.exposure.url, source: e.exposure.source } } : {}),
    ...(e.member !== undefined ? { member: { id: e.member.id } } : {}),
    ...(e.roll !== undefined ? { roll: { to_key_id: e.roll.toKeyId, grace_period_seconds: e.roll.gracePeriodSeconds } } : {}),
    ...(e.webhook !== undefined ? { webhook: { origin: e.webhook.origin } } : {}),
    ...(e.notification !== undefined ? { notification: { id: e.notification.id, type: e.notification.type } } : {}),
    ...(e.descendantKeyIds !== undefined ? { descendant_key_ids: [...e.descendantKeyIds] } : {}),
    ...(e.keyPolicy !== undefined ? { key_policy: { old: auditedKeyPolicyView(e.keyPolicy.old), new: auditedKeyPolicyView(e.keyPolicy.new) } } : {}),
    ...(e.rateLimit !== undefined ? { rate_limit: { old: e.rateLimit.old, new: e.rateLimit.new } } : {}),
    ...(e.changedFields !== undefined ? { changed_fields: [...e.changedFields] } : {}),
    ...(e.allowedCidrs !== undefined ? { allowed_cidrs: e.allowedCidrs === null ? null : [...e.allowedCidrs] } : {}),
    seq: e.seq,
    prev_hash: e.prevHash,
    hash: e.hash,
  };
}

function auditActorView(a: AuditActor): AuditActorView {
  if (a.type === 'api_key') return { type: 'api_key', key_id: a.keyId };
  if (a.type === 'operator') return a.name !== undefined ? { type: 'operator', name: a.name } : { type: 'operator' };
  return { type: a.type };
}

export function webhookView(w: WebhookEndpoint, newSecret: string | null = null): WebhookView {
  const full = fullEndpoint(w);
  return {
    organisation_id: w.organisationId,
    url: w.url,
    events: [...full.events],
    enabled: full.enabled,
    created_at: isoTimestamp(w.createdAt),
    updated_at: isoTimestamp(w.updatedAt),
    ...(newSecret !== null ? { secret: newSecret } : {}),
  };
}

/** An organisation's own endpoint as its keys see it: never a secret, except `secret` once, on creation. */
export interface WebhookEndpointView {
  url: string;
  events: string[];
  enabled: boolean;
  created_at: string;
  updated_at: string;
  secret?: string;
}

export function webhookEndpointView(w: WebhookEndpoint, newSecret: string | null = null): WebhookEndpointView {
  const full = fullEndpoint(w);
  return {
    url: w.url,
    events: [...full.events],
    enabled: full.enabled,
    created_at: isoTimestamp(w.createdAt),
    updated_at: isoTimestamp(w.updatedAt),
    ...(newSecret !== null ? { secret: newSecret } : {}),
  };
}

/** One delivery to an organisation's endpoint: the outbox record without its payload. */
export interface DeliveryView {
  id: string;
  event_type: Notification['type'];
  status: Notification['status'];
  attempts: number;
  /** When it was delivered or finally failed; null while pending. */
  last_attempt_at: string | null;
  last_error: string | null;
  created_at: string;
}

export function deliveryView(n: Notification): DeliveryView {
  return {
    id: n.id,
    event_type: n.type,
    status: n.status,
    attempts: n.attempts,
    last_attempt_at: isoOrNull(n.completedAt),
    last_error: n.lastError,
    created_at: isoTimestamp(n.createdAt),
  };
}

export function notificationView(n: Notification): NotificationView {
  return {
    id: n.id,
    organisation_id: n.organisationId,
    type: n.type,
    status: n.status,
    attempts: n.attempts,
    next_attempt_at: n.status === 'pending' ? isoTimestamp(n.nextAttemptAt) : null,
    created_at: isoTimestamp(n.createdAt),
    completed_at: isoOrNull(n.completedAt),
    last_error: n.lastError,
    payload: JSON.parse(n.payload) as unknown,
  };
}

export function listView<T, V>(page: Page<T>, view: (item: T) => V): ListView<V> {
  return { data: page.items.map(view), meta: { next_cursor: page.nextCursor } };
}

/** One bucket of the usage routes: its start (a whole hour or midnight UTC) and its counts. */
export interface UsageBucketView {
  start: string;
  requests: number;
  rate_limited: number;
}

export function usageBucketView(b: UsageBucket): UsageBucketView {
  return { start: isoTimestamp(b.start), requests: b.requests, rate_limited: b.rateLimited };
}

/** The usage routes' answer: every bucket of the range in one page (the range is bounded), so next_cursor is null. */
export function usageView(buckets: readonly UsageBucket[]): ListView<UsageBucketView> {
  return listView({ items: [...buckets], nextCursor: null }, usageBucketView);
}
