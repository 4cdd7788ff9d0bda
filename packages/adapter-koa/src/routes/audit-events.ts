/**
 * GET /v1/organisations/{org_id}/audit-events (extension beyond v1, C-56, C-63): the organisation's
 * own audit trail, oldest first (chain order), each record with its seq, prev_hash and hash so that
 * the organisation can recompute its chain.
 */
import { auditRecord, listView } from '@cos/core';
import type { RouteKit } from './kit.js';
import { keyRoute, type Route } from './route.js';

export function auditEventRoutes(kit: RouteKit): Route[] {
  const { core } = kit;
  return [
    keyRoute('GET', '/v1/organisations/:org_id/audit-events', async (ctx, [orgId], principal) => {
      const page = await core.audit.events(principal, orgId!, ctx.query);
      kit.json(ctx, 200, listView(page, auditRecord));
    }),
  ];
}
