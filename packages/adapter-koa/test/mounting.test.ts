/**
 * Embedding: createV1Router and createKoaApp mounted in a host Koa app under
 * the host's own prefix, behind the host's own middleware, over real HTTP; every response of the
 * surface still validated against docs/openapi.yaml.
 */
import { expect } from 'chai';
import Koa from 'koa';
import { CapturingLogger, createTestCore } from '@cos/core/testing';
import { OPERATOR } from '@cos/core';
import { createKoaApp, createV1Router, mountAt } from '@cos/adapter-koa';
import { Api, listen, type Listening } from './support/http.js';

interface Host {
  readonly listening: Listening;
  readonly api: Api;
  readonly raw: (path: string) => Promise<Response>;
  readonly seen: string[];
  readonly platformKey: string;
  readonly orgId: string;
}

async function host(mount: (app: Koa, surface: { router: Koa.Middleware; app: Koa }) => void, prefix: string): Promise<Host> {
  const tc = createTestCore({ config: { unauthRateLimitPerMinute: 2 } });
  const system = await tc.core.organisations.create(OPERATOR, { name: 'Platform', slug: 'platform' }, { isSystem: true });
  const issued = await tc.core.apiKeys.issue(OPERATOR, system.id, { label: 'host test' });
  const deps = { core: tc.core, logger: new CapturingLogger() };
  const options = { serviceVersion: '9.9.9' };
  const app = new Koa();
  const seen: string[] = [];
  // The host's own middleware in front: it sees every request and sets its own header.
  app.use(async (ctx, next) => {
    seen.push(ctx.path);
    ctx.set('X-Host', 'yes');
    await next();
  });
  mount(app, { router: createV1Router(deps, options), app: createKoaApp(deps, options) });
  // The host's own routes behind.
  app.use(async (ctx) => {
    ctx.status = 200;
    ctx.body = { host: true, path: ctx.path };
  });
  const listening = await listen(app.callback());
  return {
    listening,
    api: new Api(listening.baseUrl, prefix),
    raw: (path) => fetch(`${listening.baseUrl}${path}`),
    seen,
    platformKey: issued.rawKey,
    orgId: system.id,
  };
}

describe('adapter-koa: mounting in a host Koa app', () => {
  let h: Host | undefined;
  afterEach(async () => {
    await h?.listening.close();
    h = undefined;
  });

  it('createV1Router under the host prefix /compliance: surface served, Location and 429 instance keep the prefix', async () => {
    h = await host((app, s) => app.use(mountAt('/compliance', s.router)), '/compliance');
    const version = await h.api.get('/v1/version');
    expect(version.status).to.equal(200);
    expect(version.body.service_version).to.equal('9.9.9');
    expect(version.headers.get('x-host')).to.equal('yes');
    expect(version.headers.get('x-request-id')).to.be.a('string');

    const created = await h.api.post('/v1/organisations', { key: h.platformKey, json: { name: 'Hosted', slug: 'hosted' } });
    expect(created.status).to.equal(201);
    expect(created.headers.get('location')).to.equal(`/compliance/v1/organisations/${created.body.id}`);
    // The Location address, used as is, reaches the new organisation.
    const fetched = await fetch(`${h.listening.baseUrl}${created.headers.get('location')!}`, {
      headers: { authorization: `Bearer ${h.platformKey}` },
    });
    expect(fetched.status).to.equal(200);
    expect(((await fetched.json()) as { id: string }).id).to.equal(created.body.id);

    await h.api.get('/v1/health');
    const limited = await h.api.get('/v1/health');
    expect(limited.status).to.equal(429);
    expect(limited.body.instance).to.equal('/compliance/v1/health');

    const unknown = await h.api.get('/v1/nothing');
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error).to.equal('NOT_FOUND');
    expect(h.seen).to.include('/compliance/v1/version');
  });

  it('createV1Router: requests outside /v1 (and outside the prefix) reach the host\'s own routes untouched', async () => {
    h = await host((app, s) => app.use(mountAt('/compliance', s.router)), '/compliance');
    for (const path of ['/compliance/other', '/elsewhere', '/compliance', '/compliancex/v1/health']) {
      const res = await h.raw(path);
      expect(res.status, path).to.equal(200);
      expect(await res.json()).to.deep.equal({ host: true, path });
      expect(res.headers.has('x-ratelimit-limit')).to.equal(false);
    }
  });

  it('createV1Router mounted at the host root serves /v1 and passes everything else on', async () => {
    h = await host((app, s) => app.use(s.router), '');
    expect((await h.api.get('/v1/organisations', { key: h.platformKey })).status).to.equal(200);
    const other = await h.raw('/status');
    expect(await other.json()).to.deep.equal({ host: true, path: '/status' });
  });

  it('createKoaApp mounted as a whole under /svc: the service answers everything under the prefix', async () => {
    h = await host((app, s) => app.use(mountAt('/svc', s.app)), '/svc');
    const org = await h.api.get(`/v1/organisations/${h.orgId}`, { key: h.platformKey });
    expect(org.status).to.equal(200);
    expect(org.headers.get('x-host')).to.equal('yes');
    // createKoaApp owns every path under its mount point: non-/v1 paths are its 404s, not the host's.
    const unknown = await h.api.get('/elsewhere');
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error).to.equal('NOT_FOUND');
    const outside = await h.raw('/other');
    expect(await outside.json()).to.deep.equal({ host: true, path: '/other' });
  });

  it('mountAt rejects prefixes that are not "/segment[/segment…]"', () => {
    const noop: Koa.Middleware = async () => undefined;
    for (const prefix of ['', '/', 'api', '/api/', '/api?x']) expect(() => mountAt(prefix, noop), prefix).to.throw(TypeError);
    expect(() => mountAt('/api/v2', noop)).to.not.throw();
  });
});
