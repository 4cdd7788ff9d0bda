/** The four API key operations (spec §3, §4; C-2, C-16, C-22, C-35). */
import { apiKeyView, issuedKeyView, listView, type ApiKey } from '@cos/core';
import type { RouteKit } from './kit.js';
import { keyRoute, type Route } from './route.js';

export function apiKeyRoutes(kit: RouteKit): Route[] {
  const { core } = kit;
  return [
    keyRoute('GET', '/v1/organisations/:org_id/api-keys', async (ctx, [orgId], principal) => {
      const page = await core.apiKeys.list(principal, orgId!, ctx.query);
      const now = core.clock.now();
      kit.json(ctx, 200, listView(page, (k: ApiKey) => apiKeyView(k, now)));
    }),
    keyRoute('POST', '/v1/organisations/:org_id/api-keys', async (ctx, [orgId], principal) => {
      const body = await kit.body(ctx, principal, 'api_keys.issue', orgId!);
      const issued = await core.apiKeys.issue(principal, orgId!, body);
      // C-16: the only response that carries a raw key must not be stored by any cache.
      ctx.set('Cache-Control', 'no-store');
      kit.created(ctx, issued.key.id, issuedKeyView(issued, core.clock.now()));
    }),
    keyRoute('GET', '/v1/organisations/:org_id/api-keys/:key_id', async (ctx, [orgId, keyId], principal) => {
      const key = await core.apiKeys.get(principal, orgId!, keyId!);
      kit.json(ctx, 200, apiKeyView(key, core.clock.now()));
    }),
    keyRoute('DELETE', '/v1/organisations/:org_id/api-keys/:key_id', async (ctx, [orgId, keyId], principal) => {
      await core.apiKeys.revoke(principal, orgId!, keyId!);
      kit.noContent(ctx);
    }),
  ];
}
