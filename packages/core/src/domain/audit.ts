/** Audit entries (C-40, C-41): append-only governance events. */
import type { WebhookEventType } from './webhook.js';
import type { KeyPolicy } from './key-policy.js';

export type AuditKind =
  | 'api_key_revoked'
  | 'api_key_issued'
  | 'api_key_exposed'
  | 'api_key_rolled'
  | 'organisation_created'
  | 'organisation_updated'
  | 'member_added'
  | 'member_removed'
  | 'webhook_endpoint_set'
  | 'webhook_endpoint_removed'
  | 'webhook_secret_rotated'
  | 'notification_retried'
  | 'organisation_policy_updated'
  | 'organisation_rate_limit_changed'
  | 'api_key_updated';
export const AUDIT_KINDS: readonly AuditKind[] = [
  'api_key_revoked',
  'api_key_issued',
  'api_key_exposed',
  'api_key_rolled',
  'organisation_created',
  'organisation_updated',
  'member_added',
  'member_removed',
  'webhook_endpoint_set',
  'webhook_endpoint_removed',
  'webhook_secret_rotated',
  'notification_retried',
  'organisation_policy_updated',
  'organisation_rate_limit_changed',
  'api_key_updated',
];

/**
 * Who did it: an API key over HTTP, the operator through the CLI, or the secret-scanning programme
 * (an alert that found a key in public, C-58).
 */
export type AuditActor =
  | { readonly type: 'api_key'; readonly keyId: string }
  | OperatorActor
  | { readonly type: 'secret_scanning' };

/**
 * The operator, with the name the CLI ran under (`--actor`, default the OS user name).
 * Entries written before names were recorded, and operators of embedders that give none, have no
 * `name` property.
 */
export interface OperatorActor {
  readonly type: 'operator';
  readonly name?: string;
}

export const AUDIT_ACTOR_TYPES: readonly AuditActor['type'][] = ['api_key', 'operator', 'secret_scanning'];

/**
 * Where a key was found (`api_key_exposed` only): the scanner's token type, the public URL and the
 * source it names. Never the token itself (C-58).
 */
export interface KeyExposure {
  readonly type: string;
  readonly url: string | null;
  readonly source: string | null;
}

/**
 * The member of a `member_added` / `member_removed` entry (C-58), by id only: an append-only log
 * never holds a member's e-mail address, which an erasure request could not remove (C-63).
 */
export interface AuditMember {
  readonly id: string;
}

/** What a roll did (`api_key_rolled` only): the replacement key and the old key's grace period. */
export interface KeyRoll {
  readonly toKeyId: string;
  readonly gracePeriodSeconds: number;
}

/**
 * The endpoint of a `webhook_endpoint_set` / `_removed` / `webhook_secret_rotated` entry: the URL's
 * origin only (scheme, host, port). Never the path or query (hook URLs often carry a token there),
 * never user information, never the signing secret.
 */
export interface AuditWebhook {
  readonly origin: string;
}

/** The notification a `notification_retried` entry made due again. */
export interface AuditNotification {
  readonly id: string;
  readonly type: WebhookEventType;
}

export interface AuditEntry {
  readonly id: string;
  readonly kind: AuditKind;
  readonly occurredAt: Date;
  readonly organisationId: string;
  /** Set for key events, null for organisation events. */
  readonly keyId: string | null;
  readonly keyPrefix: string | null;
  readonly actor: AuditActor;
  /** `api_key_exposed` entries only: where the key was found. */
  readonly exposure?: KeyExposure;
  /** `member_added` / `member_removed` entries only: which member. */
  readonly member?: AuditMember;
  /** `api_key_rolled` entries only: the new key and the grace period (C-58). */
  readonly roll?: KeyRoll;
  /** Webhook endpoint entries only: the endpoint's origin. */
  readonly webhook?: AuditWebhook;
  /** `notification_retried` entries only. */
  readonly notification?: AuditNotification;
  /**
   * `api_key_exposed` entries only (C-61, C-100): the active keys the exposed key issued or rolled,
   * directly or transitively, in any organisation, when it was reported (ids only, sorted).
   */
  readonly descendantKeyIds?: readonly string[];
  /** `organisation_policy_updated` entries only (C-62): the policy before and after. */
  readonly keyPolicy?: KeyPolicyChange;
  /** `organisation_rate_limit_changed` entries only (C-241): the organisation's own limit before and after. */
  readonly rateLimit?: RateLimitChange;
  /** `api_key_updated` entries only (C-261): the names of the fields changed, sorted (never metadata values). */
  readonly changedFields?: readonly string[];
  /**
   * The key's allowed networks (C-262; not secret): on `api_key_issued` entries of a restricted key,
   * and on `api_key_updated` entries that changed them (null: the restriction was lifted).
   */
  readonly allowedCidrs?: readonly string[] | null;
}

/**
 * What an `organisation_rate_limit_changed` entry records: requests per minute before and after,
 * null where the organisation had (or returned to) no limit of its own, the default.
 */
export interface RateLimitChange {
  readonly old: number | null;
  readonly new: number | null;
}

/**
 * A key policy as an audit entry recorded it: entries written before the policy had an expiry
 * notice period lack `expiryNoticeSeconds` (the entry is kept as written: its hash covers it).
 */
export type AuditedKeyPolicy = Omit<KeyPolicy, 'expiryNoticeSeconds'> & { readonly expiryNoticeSeconds?: number };

/** What an `organisation_policy_updated` entry records. */
export interface KeyPolicyChange {
  readonly old: AuditedKeyPolicy;
  readonly new: AuditedKeyPolicy;
}
