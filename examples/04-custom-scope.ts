/**
 * Example 4: protect one of the host's own Koa routes with a scope of the host's own. The host
 * declares `reports:read` when it creates the core; keys can then be issued with it (and only with
 * declared or built-in scopes); the host's route authenticates the caller through the core and
 * requires the scope, and the mounted /v1 API keeps checking the built-in ones.
 *
 *   node --import tsx --conditions=source examples/04-custom-scope.ts
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import Koa from 'koa';
import { createV1Router, DEFAULT_ERRORS_URL, renderError } from '@cos/adapter-koa';
import { createCore, InProcessRateCounter, OPERATOR, requireScope, silentLogger } from '@cos/core';
import { createSqlStore } from '@cos/store-sql';

export async function main() {
  const store = createSqlStore({ databaseUrl: 'sqlite::memory:' });
  let server: Server | undefined;
  try {
    await store.migrate();
    const core = createCore({
      stores: store.stores,
      unitOfWork: store.unitOfWork,
      health: store.health,
      counter: new InProcessRateCounter(),
      // The host's own scope names, `resource:action`: the closed set is now the eight built-in
      // scopes, keys:introspect (for system organisations' keys only) and these.
      scopes: ['reports:read'],
    });
    const tenant = await core.organisations.create(OPERATOR, { name: 'Tenant One', slug: 'tenant-one' });
    const reporter = await core.apiKeys.issue(OPERATOR, tenant.id, { label: 'reports', scopes: ['reports:read'] });
    const reader = await core.apiKeys.issue(OPERATOR, tenant.id, { label: 'reader', scopes: ['organisations:read'] });
    // Nobody declared `invoices:read`: no key can hold it.
    const undeclared = await core.apiKeys
      .issue(OPERATOR, tenant.id, { label: 'invoices', scopes: ['invoices:read'] })
      .then(() => 'issued', (e: { details?: unknown }) => e.details);

    const app = new Koa();
    app.use(createV1Router({ core, logger: silentLogger }, { serviceVersion: '1.4.2' }));
    // The host's own route: authenticate with the core, require the host's scope, answer in the
    // API's error shape (401, 403 with {field: "scope", issue: "requires reports:read"}).
    app.use(async (ctx) => {
      if (ctx.path !== '/reports') return;
      try {
        const principal = await core.authenticator.authenticate(ctx.get('authorization'));
        requireScope(principal, 'reports:read');
        ctx.body = { organisation_id: principal.organisationId, scopes: principal.scopes, report: 'all green' };
      } catch (e) {
        const answer = renderError(e, { requestId: 'host', instance: ctx.path, errorsUrl: DEFAULT_ERRORS_URL });
        ctx.status = answer.status;
        ctx.type = answer.contentType;
        ctx.body = answer.body;
      }
    });

    server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const get = async (path: string, key?: string) => {
      const res = await fetch(`${base}${path}`, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };

    return {
      scopes: core.scopes,
      undeclared,
      reportWithScope: await get('/reports', reporter.rawKey),
      reportWithoutScope: await get('/reports', reader.rawKey),
      reportWithoutKey: await get('/reports'),
      // The host's scope opens nothing of the v1 API, and the v1 scopes nothing of the host's.
      organisationWithReportScope: await get(`/v1/organisations/${tenant.id}`, reporter.rawKey),
      organisationWithReadScope: await get(`/v1/organisations/${tenant.id}`, reader.rawKey),
    };
  } finally {
    const open = server;
    if (open !== undefined) await new Promise((resolve) => open.close(resolve));
    await store.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await main(), null, 2));
}
