// The physical limit on this machine: bare Koa + @koa/router answering GET /v1/organisations/:id
// with the same JSON the service returns, from memory (no auth, no store, no counter, no logging).
//
//   node bench/baseline.mjs --port 4100 --body /tmp/org.json [--introspection /tmp/active.json] [--plain]
//
// The body file holds the exact JSON body the service answered in the pre-flight check; it is
// parsed once and Koa serialises it per request, as the service does. With --introspection, it also
// answers POST /v1/introspect with that file's JSON, after reading the request's JSON body as a bare
// Koa app does (raw-body, then JSON.parse): the floor of the introspection's own request.
// With --plain, node:http alone answers the same routes, the JSON serialised once at start and the
// POST's body taken from the stream's buffer once it has arrived, then parsed: what Node's HTTP
// server itself costs for a GET and for a POST with a body, under any framework.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { parseArgs } from 'node:util';
import { importFrom } from './lib/resolve.mjs';

const { values } = parseArgs({
  options: { port: { type: 'string', default: '4100' }, host: { type: 'string', default: '127.0.0.1' }, body: { type: 'string' }, introspection: { type: 'string' }, plain: { type: 'boolean', default: false } },
});

const body = values.body ? JSON.parse(readFileSync(values.body, 'utf8')) : { id: 'baseline', name: 'Baseline' };

async function koaServer() {
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
  return http.createServer(app.callback());
}

function plainServer() {
  const bodyText = JSON.stringify(body);
  const activeText = values.introspection ? JSON.stringify(JSON.parse(readFileSync(values.introspection, 'utf8'))) : null;
  const answer = (res, status, text) => {
    res.statusCode = status;
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.end(text);
  };
  return http.createServer((req, res) => {
    if (req.method === 'GET' && req.url.startsWith('/v1/organisations/')) return answer(res, 200, bodyText);
    if (req.method === 'GET' && req.url === '/v1/health') return answer(res, 200, JSON.stringify({ status: 'ok', timestamp: new Date().toISOString() }));
    if (req.method === 'POST' && req.url === '/v1/introspect' && activeText !== null) {
      const reply = (bytes) => {
        let token;
        try {
          token = JSON.parse(bytes.toString('utf8')).token;
        } catch {
          token = undefined;
        }
        answer(res, typeof token === 'string' ? 200 : 400, typeof token === 'string' ? activeText : '{}');
      };
      // The cheapest read Node offers: a body that came with its headers is in the stream's buffer a
      // microtask later (as the service reads one); any other waits for its 'data' and 'end'.
      queueMicrotask(() => {
        if (req.readableLength > 0 && req.readableLength === Number(req.headers['content-length'])) {
          const bytes = req.read();
          req.resume();
          reply(bytes);
          return;
        }
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => reply(Buffer.concat(chunks)));
      });
      return undefined;
    }
    return answer(res, 404, '{}');
  });
}

const server = (values.plain ? plainServer() : await koaServer()).listen(Number(values.port), values.host, () => {
  process.stdout.write(`baseline listening on http://${values.host}:${values.port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
