/**
 * The five organisation operations (spec §4); authorisation and validation happen in the core (C-33).
 * Routes with a body have the core authorise before the body is read (kit.body).
 */
import { listView, organisationView, type Organisation } from '@cos/core';
import type { RouteKit } from './kit.js';
import { keyRoute, type Route } from './route.js';

export function organisationRoutes(kit: RouteKit): Route[] {
  const { core } = kit;
  /**
   * The serialised view of an organisation record. Records are immutable, and on a SQLite file the
   * authentication's credential cache hands out the same record until the file changes, so the JSON
   * of the last record answered is kept and reused while the same record comes back. One slot, not a
   * WeakMap: where every read makes a new record (Postgres), a map entry per request cost more than
   * the JSON it saved.
   */
  let last: { readonly record: Organisation; readonly text: string } | undefined;
  const organisationJson = (o: Organisation): string => {
    if (last !== undefined && last.record === o) return last.text;
    const text = JSON.stringify(organisationView(o));
    last = { record: o, text };
    return text;
  };
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
      kit.jsonText(ctx, 200, organisationJson(await core.organisations.get(principal, orgId!)));
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
