/**
 * Example 2: mount the /v1 API inside an existing Koa app, under the host's own prefix
 * (/compliance), behind the host's own middleware and in front of the host's own routes.
 *
 *   node --import tsx --conditions=source examples/02-mount-router-in-koa.ts
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import Koa from 'koa';
import { createV1Router, mountAt } from '@cos/adapter-koa';
import { createCore, InProcessRateCounter, OPERATOR, type Logger } from '@cos/core';
import { createSqlStore } from '@cos/store-sql';

/** The host's logger behind the core's Logger port (pino fits as it is; here the lines are kept). */
function hostLogger(lines: string[]): Logger {
  const log = (level: string) => (fields: Record<string, unknown>, message: string) => {
    lines.push(JSON.stringify({ level, message, ...fields }));
  };
  return { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
}

export async function main() {
  // The store from a connection string: `sqlite:<path>`, `sqlite::memory:` or `postgres://…`.
  const store = createSqlStore({ databaseUrl: 'sqlite::memory:' });
  const logLines: string[] = [];
  const logger = hostLogger(logLines);
  let server: Server | undefined;
  try {
    await store.migrate();
    const core = createCore({
      stores: store.stores,
      unitOfWork: store.unitOfWork,
      health: store.health,
      counter: new InProcessRateCounter(),
      logger,
    });
    // A platform organisation and its key, as `cos-admin bootstrap` would make them.
    const platform = await core.organisations.create(OPERATOR, { name: 'Host platform', slug: 'host' }, { isSystem: true });
    const { rawKey } = await core.apiKeys.issue(OPERATOR, platform.id, { label: 'host example' });

    const app = new Koa();
    // The host's own middleware runs first, for its routes and for the mounted API alike.
    app.use(async (ctx, next) => {
      ctx.set('X-Served-By', 'host-app');
      await next();
    });
    // The API under /compliance: /compliance/v1/health, /compliance/v1/organisations, …
    app.use(mountAt('/compliance', createV1Router({ core, logger }, { serviceVersion: '1.4.2' })));
    // The host's own routes behind it: anything the API does not answer reaches them.
    app.use((ctx) => {
      if (ctx.path === '/status') ctx.body = { host: 'ok' };
    });

    server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const auth = { authorization: `Bearer ${rawKey}` };

    const health = await fetch(`${base}/compliance/v1/health`);
    const created = await fetch(`${base}/compliance/v1/organisations`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Tenant One', slug: 'tenant-one' }),
    });
    const tenant = (await created.json()) as { id: string; slug: string };
    const fetched = await fetch(`${base}/compliance/v1/organisations/${tenant.id}`, { headers: auth });
    const withoutKey = await fetch(`${base}/compliance/v1/organisations/${tenant.id}`);
    const hostRoute = await fetch(`${base}/status`);

    return {
      health: { status: health.status, body: (await health.json()) as { status: string } },
      created: { status: created.status, location: created.headers.get('location'), slug: tenant.slug },
      fetched: {
        status: fetched.status,
        body: (await fetched.json()) as { id: string; name: string },
        servedBy: fetched.headers.get('x-served-by'),
        rateLimitLimit: fetched.headers.get('x-ratelimit-limit'),
        requestId: fetched.headers.get('x-request-id'),
      },
      withoutKey: { status: withoutKey.status, body: (await withoutKey.json()) as { error: string; message: string } },
      hostRoute: { status: hostRoute.status, body: (await hostRoute.json()) as { host: string } },
      // One access-log line per API request went to the host's logger; none for the host's own route.
      logLines: logLines.map((line) => JSON.parse(line) as { message: string; status: number; route: string | null }),
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
