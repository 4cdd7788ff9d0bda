/** GET /v1/organisations/{org_id}/members (spec §4); members are otherwise managed by operators (C-21). */
import { listView, memberView } from '@cos/core';
import type { RouteKit } from './kit.js';
import { keyRoute, type Route } from './route.js';

export function memberRoutes(kit: RouteKit): Route[] {
  const { core } = kit;
  return [
    keyRoute('GET', '/v1/organisations/:org_id/members', async (ctx, [orgId], principal) => {
      const page = await core.members.list(principal, orgId!, ctx.query);
      kit.json(ctx, 200, listView(page, memberView));
    }),
  ];
}
