/** GET /v1/health (C-4) and GET /v1/version (C-3): no key, the global unauthenticated rate scope. */
import { API_VERSION_INFO, type VersionView } from '@cos/core';
import type { RouteKit } from './kit.js';
import { publicRoute, type Route } from './route.js';

export function metaRoutes(kit: RouteKit, serviceVersion: string): Route[] {
  const { core } = kit;
  const version: VersionView = { ...API_VERSION_INFO, service_version: serviceVersion };
  return [
    publicRoute('GET', '/v1/health', async (ctx) => {
      const report = await core.health.check();
      // C-4: the report decides; the adapter only maps "unavailable" to 503.
      kit.json(ctx, report.status === 'ok' ? 200 : 503, { status: report.status, timestamp: report.timestamp });
    }),
    publicRoute('GET', '/v1/version', async (ctx) => {
      kit.json(ctx, 200, version);
    }),
  ];
}
