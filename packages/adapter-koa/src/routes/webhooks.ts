/**
 * The organisation's own webhook endpoint (beyond v1, additive): read with webhooks:read, changed
 * with webhooks:write, the organisation's own keys only (a platform key any organisation's).
 * Every change is audited by the core with the calling key as actor.
 */
import { authorise, deliveryView, isoTimestamp, listView, webhookEndpointView, type Notification } from '@cos/core';
import { markSecretAnswer } from '../middleware/idempotency.js';
import type { RouteKit } from './kit.js';
import { keyRoute, type Route } from './route.js';

const BASE = '/v1/organisations/:org_id/webhook-endpoint';

export function webhookRoutes(kit: RouteKit): Route[] {
  const { core } = kit;
  return [
    keyRoute('GET', BASE, async (ctx, [orgId], principal) => {
      kit.json(ctx, 200, webhookEndpointView(await core.webhooks.show(principal, orgId!)));
    }),
    keyRoute('PUT', BASE, async (ctx, [orgId], principal) => {
      const body = await kit.body(ctx, principal, 'webhooks.write', orgId!);
      const change = await core.webhooks.put(principal, orgId!, body);
      // The secret is in the creation's answer only: it must not be stored by any cache.
      if (change.created) {
        ctx.set('Cache-Control', 'no-store');
        markSecretAnswer(ctx);
      }
      kit.json(ctx, change.created ? 201 : 200, webhookEndpointView(change.endpoint, change.newSecret));
    }),
    keyRoute('DELETE', BASE, async (ctx, [orgId], principal) => {
      await kit.withoutBody(ctx, principal, () => authorise(principal, 'webhooks.write', orgId!));
      await core.webhooks.remove(principal, orgId!);
      kit.noContent(ctx);
    }),
    keyRoute('POST', `${BASE}/rotate-secret`, async (ctx, [orgId], principal) => {
      const body = await kit.optionalBody(ctx, principal, 'webhooks.write', orgId!);
      const rotated = await core.webhooks.rotateSecret(principal, orgId!, body);
      ctx.set('Cache-Control', 'no-store');
      markSecretAnswer(ctx);
      kit.json(ctx, 200, {
        secret: rotated.newSecret,
        previous_secret_expires_at: rotated.previousSecretExpiresAt === null ? null : isoTimestamp(rotated.previousSecretExpiresAt),
      });
    }),
    keyRoute('POST', `${BASE}/ping`, async (ctx, [orgId], principal) => {
      await kit.optionalBody(ctx, principal, 'webhooks.write', orgId!);
      const ping = await core.webhooks.ping(principal, orgId!);
      kit.json(ctx, 202, { notification_id: ping.id });
    }),
    keyRoute('GET', `${BASE}/deliveries`, async (ctx, [orgId], principal) => {
      const page = await core.webhooks.deliveries(principal, orgId!, ctx.query);
      kit.json(ctx, 200, listView(page, (n: Notification) => deliveryView(n)));
    }),
    keyRoute('POST', `${BASE}/deliveries/:delivery_id/redeliver`, async (ctx, [orgId, deliveryId], principal) => {
      await kit.optionalBody(ctx, principal, 'webhooks.write', orgId!);
      const again = await core.webhooks.redeliver(principal, orgId!, deliveryId!);
      kit.json(ctx, 202, { notification_id: again.id });
    }),
  ];
}
