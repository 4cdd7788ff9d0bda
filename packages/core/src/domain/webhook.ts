/**
 * Signed webhooks (C-59): an organisation's optional endpoint, the events sent to it and the outbox
 * record of each delivery. Events are written to the outbox in the same unit of work as the change
 * they report; `serve` delivers them (Standard Webhooks signing) with retries.
 */
import type { Random } from './random.js';

export type WebhookEventType = 'api_key.issued' | 'api_key.revoked' | 'api_key.exposed' | 'api_key.rolled' | 'api_key.expiring' | 'ping';
export const WEBHOOK_EVENT_TYPES: readonly WebhookEventType[] = ['api_key.issued', 'api_key.revoked', 'api_key.exposed', 'api_key.rolled', 'api_key.expiring', 'ping'];
/** The events an endpoint may subscribe to (`ping` is sent on request whatever the subscription). */
export const SUBSCRIBABLE_EVENT_TYPES: readonly WebhookEventType[] = ['api_key.issued', 'api_key.revoked', 'api_key.exposed', 'api_key.rolled', 'api_key.expiring'];
/** Every event. */
export const ALL_EVENTS = '*';

/** An organisation's webhook endpoint. The secret signs every delivery (`whsec_` + base64). */
export interface WebhookEndpoint {
  readonly organisationId: string;
  readonly url: string;
  /**
   * The signing secret as stored: `whsec_…` in clear, or sealed (`whenc:v1:…`) under the key
   * configured when it was written (WebhookSecretCipher opens it for signing).
   */
  readonly secret: string;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /** The events sent to it: event types, or `["*"]` for every one (absent: every one). */
  readonly events?: readonly string[];
  /** False: nothing is written to the outbox for it (absent: true). */
  readonly enabled?: boolean;
  /**
   * The secret a rotation replaced, stored like `secret`, while its overlap lasts: deliveries until
   * `previousSecretExpiresAt` carry a signature with it too (absent or null: none).
   */
  readonly previousSecret?: string | null;
  readonly previousSecretExpiresAt?: Date | null;
}

/** The endpoint with every optional field at its value (defaults filled in). */
export function fullEndpoint(w: WebhookEndpoint): Required<WebhookEndpoint> {
  return {
    organisationId: w.organisationId,
    url: w.url,
    secret: w.secret,
    createdAt: w.createdAt,
    updatedAt: w.updatedAt,
    events: w.events ?? [ALL_EVENTS],
    enabled: w.enabled ?? true,
    previousSecret: w.previousSecret ?? null,
    previousSecretExpiresAt: w.previousSecretExpiresAt ?? null,
  };
}

/** True when the endpoint wants events of `type` now (enabled, subscribed). */
export function endpointWants(w: WebhookEndpoint, type: WebhookEventType): boolean {
  const full = fullEndpoint(w);
  if (!full.enabled) return false;
  return type === 'ping' || full.events.includes(ALL_EVENTS) || full.events.includes(type);
}

export type NotificationStatus = 'pending' | 'delivered' | 'failed';
export const NOTIFICATION_STATUSES: readonly NotificationStatus[] = ['pending', 'delivered', 'failed'];

/** One event in the outbox: what is sent, and how its delivery stands. */
export interface Notification {
  /** Also the `webhook-id` header: the same on every attempt, so a receiver can drop repeats. */
  readonly id: string;
  readonly organisationId: string;
  readonly type: WebhookEventType;
  /** The exact JSON body sent (`{type, timestamp, data}`): never a raw key or digest (C-59). */
  readonly payload: string;
  readonly status: NotificationStatus;
  /** Attempts started so far (a claim starts one). */
  readonly attempts: number;
  /** Pending: not sent before this time. */
  readonly nextAttemptAt: Date;
  readonly createdAt: Date;
  /** When it was delivered, or finally failed; null while pending. */
  readonly completedAt: Date | null;
  /** The last attempt's failure (status, timeout or connection error), or null. */
  readonly lastError: string | null;
}

/**
 * What caused an event: a key over HTTP (`key_id` names the calling key), the operator (CLI), the
 * secret-scanning programme (a key found in public), or a roll (the old key revoked because a roll
 * with grace 0 replaced it by `new_key_id`).
 */
export type EventCause =
  | { readonly type: 'api_key'; readonly key_id: string }
  | { readonly type: 'operator' }
  | { readonly type: 'secret_scanning' }
  | { readonly type: 'roll'; readonly new_key_id: string };
export const EVENT_CAUSE_TYPES: readonly EventCause['type'][] = ['api_key', 'operator', 'secret_scanning', 'roll'];

/** What a webhook event says about a key (spec: never the raw key or its digest). */
export interface KeyEventData {
  readonly organisation_id: string;
  readonly key_id: string;
  readonly key_prefix: string;
  readonly label: string;
  readonly url?: string | null;
  readonly source?: string | null;
  /** `api_key.rolled` only: the replacement key and the old key's grace period. */
  readonly new_key_id?: string;
  readonly new_key_prefix?: string;
  readonly grace_period_seconds?: number;
  /** `api_key.exposed` only (C-61): the exposed key's active descendants (ids only). */
  readonly descendant_key_ids?: readonly string[];
  /** What caused the event (every event carries one). */
  readonly cause: EventCause;
}

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
const WEBHOOK_SECRET_BYTES = 32;

/** A new signing secret: `whsec_` + base64 of 32 random bytes (the Standard Webhooks form). */
export function generateWebhookSecret(random: Random): string {
  return WEBHOOK_SECRET_PREFIX + Buffer.from(random.bytes(WEBHOOK_SECRET_BYTES)).toString('base64');
}

/** What an audit entry may say about an endpoint: its origin (scheme, host, port), never path, query or credentials. */
export function webhookOrigin(url: string): string {
  return new URL(url).origin;
}

/**
 * What an `api_key.expiring` event says (C-281): the key and when it expires. Nobody caused it (the
 * expiry notices' scan found the key within its organisation's notice period), so it has no `cause`.
 */
export interface ExpiringEventData {
  readonly organisation_id: string;
  readonly key_id: string;
  readonly key_prefix: string;
  readonly label: string;
  /** ISO 8601, milliseconds, UTC (as every timestamp of the API). */
  readonly expires_at: string;
}

/** What a `ping` event says: the organisation, and who asked for it. */
export interface PingEventData {
  readonly organisation_id: string;
  readonly cause: EventCause;
}

/** A new pending outbox record for `type`, due at once. */
export function newNotification(
  random: Random,
  type: WebhookEventType,
  at: Date,
  data: KeyEventData | ExpiringEventData | PingEventData,
): Notification {
  const payload = JSON.stringify({ type, timestamp: at.toISOString(), data });
  return {
    id: random.uuid(),
    organisationId: data.organisation_id,
    type,
    payload,
    status: 'pending',
    attempts: 0,
    nextAttemptAt: at,
    createdAt: at,
    completedAt: null,
    lastError: null,
  };
}
