/**
 * The five organisation operations (spec §4), the organisation's key policy and its rate limit; authorisation and validation happen in the core (C-33).
 * Routes with a body have the core authorise before the body is read (kit.body). Nothing is cached
 * here: GET of the caller's own organisation hands the core the record authentication read in this
 * request (`state.organisation`), and every other read is the core's and its store's.
 */
import { keyPolicyView, listView, organisationJson, organisationView, rateLimitView } from '@cos/core';
import type Koa from 'koa';
import type { CosRequestState } from '../state.js';
import type { RouteKit } from './kit.js';
import { keyRoute, type Route } from './route.js';

export function organisationRoutes(kit: RouteKit): Route[] {
  const { core } = kit;
  return [
    keyRoute('GET', '/v1/organisations', async (ctx, _params, principal) => {
      const page = await core.organisations.list(principal, ctx.query);
      kit.json(ctx, 200, listView(page, organisationView));
    }),
    keyRoute('POST', '/v1/organisations', async (ctx, _params, principal) => {
      const organisation = await core.organisations.create(principal, await kit.body(ctx, principal, 'organisations.create'));
      kit.created(ctx, organisation.id, organisationView(organisation));
    }),
    keyRoute('GET', '/v1/organisations/:org_id', async (ctx, [orgId], principal) => {
      // The record authentication read with the key in this request, when it is the one asked for.
      const authenticatedOrganisation = requestState(ctx).organisation;
      const organisation = await core.organisations.get(principal, orgId!, authenticatedOrganisation === undefined ? undefined : { authenticatedOrganisation });
      kit.jsonText(ctx, 200, organisationJson(organisation));
    }),
    keyRoute('PUT', '/v1/organisations/:org_id', async (ctx, [orgId], principal) => {
      const body = await kit.body(ctx, principal, 'organisations.replace', orgId!);
      kit.json(ctx, 200, organisationView(await core.organisations.replace(principal, orgId!, body)));
    }),
    keyRoute('PATCH', '/v1/organisations/:org_id', async (ctx, [orgId], principal) => {
      const body = await kit.body(ctx, principal, 'organisations.patch', orgId!);
      kit.json(ctx, 200, organisationView(await core.organisations.patch(principal, orgId!, body)));
    }),
    // The organisation's key policy (C-62): read by its own keys with organisations:read or a
    // platform key; replaced only by a platform key with organisations:write.
    keyRoute('GET', '/v1/organisations/:org_id/key-policy', async (ctx, [orgId], principal) => {
      kit.json(ctx, 200, keyPolicyView(await core.keyPolicies.get(principal, orgId!)));
    }),
    keyRoute('PUT', '/v1/organisations/:org_id/key-policy', async (ctx, [orgId], principal) => {
      const body = await kit.body(ctx, principal, 'organisations.key_policy.replace');
      kit.json(ctx, 200, keyPolicyView(await core.keyPolicies.replace(principal, orgId!, body)));
    }),
    // The organisation's rate limit, its plan (C-240, C-241): read like the key policy; set only by
    // a platform key with organisations:write.
    keyRoute('GET', '/v1/organisations/:org_id/rate-limit', async (ctx, [orgId], principal) => {
      kit.json(ctx, 200, rateLimitView(await core.rateLimits.get(principal, orgId!)));
    }),
    keyRoute('PUT', '/v1/organisations/:org_id/rate-limit', async (ctx, [orgId], principal) => {
      const body = await kit.body(ctx, principal, 'organisations.rate_limit.replace');
      kit.json(ctx, 200, rateLimitView(await core.rateLimits.replace(principal, orgId!, body)));
    }),
  ];
}

function requestState(ctx: Koa.Context): CosRequestState {
  return (ctx.state as { cos: CosRequestState }).cos;
}
