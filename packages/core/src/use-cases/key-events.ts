/**
 * Webhook events about keys (C-59): written to the outbox through the same stores, and so in the
 * same unit of work, as the change they report. Nothing is written for an organisation without a
 * webhook endpoint.
 */
import type { ApiKey } from '../domain/api-key.js';
import type { KeyExposure } from '../domain/audit.js';
import { newNotification, type WebhookEventType } from '../domain/webhook.js';
import type { Random } from '../ports/random.js';
import type { Stores } from '../ports/unit-of-work.js';

/**
 * Enqueues one event per entry of `types` about `key` (one read of the organisation's endpoint for
 * all of them); `exposure` adds `url` and `source` to the `api_key.exposed` event.
 */
export async function notifyKeyEvents(
  stores: Stores,
  random: Random,
  types: readonly WebhookEventType[],
  at: Date,
  key: Pick<ApiKey, 'id' | 'organisationId' | 'keyPrefix' | 'label'>,
  exposure?: KeyExposure,
): Promise<void> {
  if (types.length === 0 || (await stores.webhooks.get(key.organisationId)) === null) return;
  for (const type of types) {
    await stores.outbox.enqueue(
      newNotification(random, type, at, {
        organisation_id: key.organisationId,
        key_id: key.id,
        key_prefix: key.keyPrefix,
        label: key.label,
        ...(type === 'api_key.exposed' && exposure !== undefined ? { url: exposure.url, source: exposure.source } : {}),
      }),
    );
  }
}
