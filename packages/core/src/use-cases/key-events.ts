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

export async function notifyKeyEvent(
  stores: Stores,
  random: Random,
  type: WebhookEventType,
  at: Date,
  key: Pick<ApiKey, 'id' | 'organisationId' | 'keyPrefix' | 'label'>,
  exposure?: KeyExposure,
): Promise<void> {
  if ((await stores.webhooks.get(key.organisationId)) === null) return;
  await stores.outbox.enqueue(
    newNotification(random, type, at, {
      organisation_id: key.organisationId,
      key_id: key.id,
      key_prefix: key.keyPrefix,
      label: key.label,
      ...(exposure !== undefined ? { url: exposure.url, source: exposure.source } : {}),
    }),
  );
}
