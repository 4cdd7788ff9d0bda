/** GET /v1/me, the four API key operations (spec §3, §4; C-2, C-16, C-22, C-35), the roll (C-56) and the update (C-261). */
import type Koa from 'koa';
import { apiKeyView, authoriseRevocation, issuedKeyView, listView, organisationView, type ApiKey, type IssuedKey } from '@cos/core';
import { markRawKeyAnswer } from '../middleware/idempotency.js';
import { originalPath } from '../paths.js';
import type { RouteKit } from './kit.js';
import { keyRoute, type Route } from './route.js';

/** The path a roll was addressed at, less its last two segments (`/{key_id}/roll`): the key collection. */
function keyCollectionOf(rollPath: string): string {
  return rollPath.slice(0, rollPath.lastIndexOf('/', rollPath.lastIndexOf('/') - 1));
}

export function apiKeyRoutes(kit: RouteKit): Route[] {
  const { core } = kit;
  // C-16: the only responses that carry a raw key must not be stored by any cache.
  const createdKey = (ctx: Koa.Context, collectionPath: string, issued: IssuedKey): void => {
    ctx.set('Cache-Control', 'no-store');
    markRawKeyAnswer(ctx);
    kit.createdIn(ctx, collectionPath, issued.key.id, issuedKeyView(issued, core.clock.now()));
  };
  return [
    // Who am I: any valid key, counted like every authenticated request, no organisation in the path.
    keyRoute('GET', '/v1/me', async (ctx, _params, principal) => {
      const me = await core.apiKeys.whoAmI(principal);
      kit.json(ctx, 200, { api_key: apiKeyView(me.key, core.clock.now()), organisation: organisationView(me.organisation) });
    }),
    keyRoute('GET', '/v1/organisations/:org_id/api-keys', async (ctx, [orgId], principal) => {
      const page = await core.apiKeys.list(principal, orgId!, ctx.query);
      const now = core.clock.now();
      kit.json(ctx, 200, listView(page, (k: ApiKey) => apiKeyView(k, now)));
    }),
    keyRoute('POST', '/v1/organisations/:org_id/api-keys', async (ctx, [orgId], principal) => {
      const body = await kit.body(ctx, principal, 'api_keys.issue', orgId!);
      createdKey(ctx, originalPath(ctx), await core.apiKeys.issue(principal, orgId!, body));
    }),
    keyRoute('POST', '/v1/organisations/:org_id/api-keys/:key_id/roll', async (ctx, [orgId, keyId], principal) => {
      const body = await kit.optionalBody(ctx, principal, 'api_keys.issue', orgId!);
      createdKey(ctx, keyCollectionOf(originalPath(ctx)), await core.apiKeys.roll(principal, orgId!, keyId!, body));
    }),
    keyRoute('GET', '/v1/organisations/:org_id/api-keys/:key_id', async (ctx, [orgId, keyId], principal) => {
      const key = await core.apiKeys.get(principal, orgId!, keyId!);
      kit.json(ctx, 200, apiKeyView(key, core.clock.now()));
    }),
    // Label, metadata and allowed networks only (C-261): the record as changed.
    keyRoute('PATCH', '/v1/organisations/:org_id/api-keys/:key_id', async (ctx, [orgId, keyId], principal) => {
      const body = await kit.body(ctx, principal, 'api_keys.update', orgId!);
      kit.json(ctx, 200, apiKeyView(await core.apiKeys.update(principal, orgId!, keyId!, body), core.clock.now()));
    }),
    keyRoute('DELETE', '/v1/organisations/:org_id/api-keys/:key_id', async (ctx, [orgId, keyId], principal) => {
      await kit.withoutBody(ctx, principal, () => authoriseRevocation(principal, orgId!, keyId!));
      await core.apiKeys.revoke(principal, orgId!, keyId!);
      kit.noContent(ctx);
    }),
  ];
}
