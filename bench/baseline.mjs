// The physical limit on this machine: bare Koa + @koa/router answering GET /v1/organisations/:id
// with the same JSON the service returns, from memory (no auth, no store, no counter, no logging).
//
//   node bench/baseline.mjs --port 4100 --body /tmp/org.json [--introspection /tmp/active.json]
//
// The body file holds the exact JSON body the service answered in the pre-flight check; it is
// parsed once and Koa serialises it per request, as the service does. With --introspection, it also
// answers POST /v1/introspect with that file's JSON, after reading the request's JSON body as a bare
// Koa app does (raw-body, then JSON.parse): the floor of the introspection's own request.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { importFrom } from './lib/resolve.mjs';

const { values } = parseArgs({
  options: { port: { type: 'string', default: '4100' }, host: { type: 'string', default: '127.0.0.1' }, body: { type: 'string' }, introspection: { type: 'string' } },
});

const body = values.body ? JSON.parse(readFileSync(values.body, 'utf8')) : { id: 'baseline', name: 'Baseline' };
// The service's own Koa; @koa/router is the bench's (a root devDependency: the adapter routes with
// its own matcher, see docs/architecture.md "Libraries of the HTTP adapter").
const { default: Koa } = await importFrom('adapter-koa', 'koa');
const { Router } = await import('@koa/router');
const { default: getRawBody } = await importFrom('adapter-koa', 'raw-body');

const app = new Koa();
const router = new Router({ prefix: '/v1' });
router.get('/organisations/:id', (ctx) => {
  ctx.body = body;
});
router.get('/health', (ctx) => {
  ctx.body = { status: 'ok', timestamp: new Date().toISOString() };
});
if (values.introspection) {
  const active = JSON.parse(readFileSync(values.introspection, 'utf8'));
  router.post('/introspect', async (ctx) => {
    const { token } = JSON.parse(await getRawBody(ctx.req, { length: ctx.get('content-length'), limit: 64 * 1024, encoding: 'utf8' }));
    if (typeof token !== 'string') ctx.throw(400);
    ctx.body = active;
  });
}
app.use(router.routes()).use(router.allowedMethods());

const server = app.listen(Number(values.port), values.host, () => {
  process.stdout.write(`baseline listening on http://${values.host}:${values.port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
