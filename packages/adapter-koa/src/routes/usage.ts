/**
 * Usage counts (an extension beyond v1): GET /v1/organisations/{org_id}/api-keys/{key_id}/usage and
 * GET /v1/organisations/{org_id}/usage, the buckets with traffic of one key or of the whole
 * organisation, oldest first, in one page.
 */
import { usageView } from '@cos/core';
import type { RouteKit } from './kit.js';
import { keyRoute, type Route } from './route.js';

export function usageRoutes(kit: RouteKit): Route[] {
  const { core } = kit;
  return [
    keyRoute('GET', '/v1/organisations/:org_id/api-keys/:key_id/usage', async (ctx, [orgId, keyId], principal) => {
      kit.json(ctx, 200, usageView(await core.usage.ofKey(principal, orgId!, keyId!, ctx.query)));
    }),
    keyRoute('GET', '/v1/organisations/:org_id/usage', async (ctx, [orgId], principal) => {
      kit.json(ctx, 200, usageView(await core.usage.ofOrganisation(principal, orgId!, ctx.query)));
    }),
  ];
}
