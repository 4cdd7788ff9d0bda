/**
 * The five organisation operations (spec §4); authorisation and validation happen in the core (C-33).
 * Routes with a body have the core authorise before the body is read (kit.body).
 */
import { listView, organisationView } from '@cos/core';
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
      kit.json(ctx, 200, organisationView(await core.organisations.get(principal, orgId!)));
    }),
    keyRoute('PUT', '/v1/organisations/:org_id', async (ctx, [orgId], principal) => {
      const body = await kit.body(ctx, principal, 'organisations.replace', orgId!);
      kit.json(ctx, 200, organisationView(await core.organisations.replace(principal, orgId!, body)));
    }),
    keyRoute('PATCH', '/v1/organisations/:org_id', async (ctx, [orgId], principal) => {
      const body = await kit.body(ctx, principal, 'organisations.patch', orgId!);
      kit.json(ctx, 200, organisationView(await core.organisations.patch(principal, orgId!, body)));
    }),
  ];
}
