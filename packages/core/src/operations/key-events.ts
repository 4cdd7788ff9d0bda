/**
 * Webhook events about keys (C-59): written to the outbox through the same stores, and so in the
 * same unit of work, as the change they report. Nothing is written for an organisation without a
 * webhook endpoint.
 */
import type { ApiKey } from '../domain/api-key.js';
import type { AuditActor, KeyExposure, KeyRoll } from '../domain/audit.js';
import { endpointWants, newNotification, type EventCause, type KeyEventData, type WebhookEventType } from '../domain/webhook.js';
import type { Random } from '../ports/random.js';
import type { OuterStores } from '../ports/unit-of-work.js';

/** What the `api_key.rolled` event adds: the replacement key and the old key's grace period. */
export interface RollEventDetail extends KeyRoll {
  readonly toKeyPrefix: string;
}

/** One event to enqueue: its type and what caused it. */
export interface KeyEvent {
  readonly type: WebhookEventType;
  readonly cause: EventCause;
}

/** The cause of an event whose change was made by `actor` (the operator's name is not sent out). */
export function causeOf(actor: AuditActor): EventCause {
  if (actor.type === 'api_key') return { type: 'api_key', key_id: actor.keyId };
  if (actor.type === 'operator') return { type: 'operator' };
  return { type: 'secret_scanning' };
}

/** What the `api_key.exposed` event adds: where the key was found and its active descendants (C-61). */
export interface ExposureEventDetail extends KeyExposure {
  readonly descendantKeyIds?: readonly string[];
}

/** The fields only one event type carries: `url`/`source`/descendants (exposed), the new key and grace (rolled). */
function eventDetail(type: WebhookEventType, exposure: ExposureEventDetail | undefined, roll: RollEventDetail | undefined): Partial<KeyEventData> {
  if (type === 'api_key.exposed' && exposure !== undefined) {
    return {
      url: exposure.url,
      source: exposure.source,
      ...(exposure.descendantKeyIds !== undefined ? { descendant_key_ids: [...exposure.descendantKeyIds] } : {}),
    };
  }
  if (type === 'api_key.rolled' && roll !== undefined) {
    return { new_key_id: roll.toKeyId, new_key_prefix: roll.toKeyPrefix, grace_period_seconds: roll.gracePeriodSeconds };
  }
  return {};
}

/**
 * Enqueues one event per entry of `events` about `key`, each with its cause (one read of the
 * organisation's endpoint for all of them); `exposure` adds `url` and `source` to the `api_key.exposed` event, `roll` the new
 * key and the grace period to the `api_key.rolled` event.
 */
export async function notifyKeyEvents(
  stores: OuterStores,
  random: Random,
  events: readonly KeyEvent[],
  at: Date,
  key: Pick<ApiKey, 'id' | 'organisationId' | 'keyPrefix' | 'label'>,
  exposure?: ExposureEventDetail,
  roll?: RollEventDetail,
): Promise<void> {
  if (events.length === 0) return;
  const endpoint = await stores.webhooks.get(key.organisationId);
  if (endpoint === null) return;
  for (const { type, cause } of events) {
    // A disabled endpoint, or one not subscribed to this event, gets nothing written for it.
    if (!endpointWants(endpoint, type)) continue;
    await stores.outbox.enqueue(
      newNotification(random, type, at, {
        organisation_id: key.organisationId,
        key_id: key.id,
        key_prefix: key.keyPrefix,
        label: key.label,
        ...eventDetail(type, exposure, roll),
        cause,
      }),
    );
  }
}

/**
 * Enqueues the `api_key.expiring` event of `key` (C-281) when its organisation has an endpoint that
 * wants it; true when an event was written. The caller has recorded the notice as sent in the same
 * unit of work (ApiKeyStore.claimExpiryNotice), so the notice is written once or not at all.
 */
export async function notifyKeyExpiring(
  stores: OuterStores,
  random: Random,
  at: Date,
  key: Pick<ApiKey, 'id' | 'organisationId' | 'keyPrefix' | 'label'> & { readonly expiresAt: Date },
): Promise<boolean> {
  const endpoint = await stores.webhooks.get(key.organisationId);
  if (endpoint === null || !endpointWants(endpoint, 'api_key.expiring')) return false;
  await stores.outbox.enqueue(
    newNotification(random, 'api_key.expiring', at, {
      organisation_id: key.organisationId,
      key_id: key.id,
      key_prefix: key.keyPrefix,
      label: key.label,
      expires_at: key.expiresAt.toISOString(),
    }),
  );
  return true;
}
