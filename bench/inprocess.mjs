#!/usr/bin/env node
// CPU per request of the service's hot path with the client's network left out, for comparing
// builds on a machine too busy for `pnpm bench` to resolve a few per cent.
//
//   node bench/inprocess.mjs --scenario c                       this checkout against bare Koa
//   node bench/inprocess.mjs --scenario a --other /tmp/base     another built checkout too (A/B)
//   node bench/inprocess.mjs --scenario b --connections 50,200  Postgres + Redis, 50 against 200 connections
//   valgrind --tool=callgrind node bench/inprocess.mjs --scenario a --count 4000
//                                                               instructions: see --count below
//                                                               (b, k: with REDIS_TIMEOUT_MS=10000 in the environment)
//   node bench/inprocess.mjs --scenario i                       introspection vs this checkout's GET
//   node bench/inprocess.mjs --scenario i --stack b             the same on (b)'s stack
//   node bench/inprocess.mjs --scenario k                       (b) through a key with its own limit vs one without
//
// One Node process runs, side by side, the built service of this checkout (buildContainer and
// listen of @cos/cli, as `serve` composes them, LOG_LEVEL=warn, no OPS_PORT), optionally the built
// service of `--other` (a checkout whose packages were built with `pnpm build`), and bare Koa +
// @koa/router answering the same JSON (bench/baseline.mjs's route). Requests reach each HTTP server
// through in-memory sockets (no system call of the network), `--connections` of them (default 50)
// with one request in flight on each; the sides take turns in batches of `--per` requests,
// `--rounds` times, and each batch's CPU time (process.cpuUsage, user + system) is divided by its
// answers. Because the sides alternate batch by batch in one process, whatever else the machine does
// weighs on all of them alike: the per-round ratio between sides is the figure to read, not the
// absolute microseconds. With several connection counts (`--connections 50,200`) every server is a
// side at each count (the same server: its first N connections).
// Scenario (a): GET of the tenant's own organisation (SQLite, in-process counter); (c): the same
// with a limit of 60 per minute, so all but 60 answers per minute and side are the 429; (b): the
// same GET on Postgres and Redis as the full bench's (b) runs serve (a scratch database next to
// TEST_DATABASE_URL, REDIS_URL=TEST_REDIS_URL, the credential cache on); (i): on (a)'s stack, a
// system organisation's key holding keys:introspect introspects the tenant's key (POST
// /v1/introspect, JSON body, count false), and the same service's authenticated GET of (a) runs as
// one more side; (k): on (b)'s stack, the same GET through two keys of the tenant, one issued with
// its own limit of 1 000 000 per minute (`key issue --rate-limit`, never reached; the organisation's
// limit is 1e9, as in every scenario but (c)), one without: the key without is the first side, so
// the ratios printed are the limited key's over it. `--stack b` runs a scenario on (b)'s stack
// instead of its own (the default: (b)'s for b and k, (a)'s for the others), e.g. (i) on Postgres
// and Redis against the GET of (b).
// `--count N`: on the side counted, one batch of `--per` (on Redis, then the wait for the change
// bound below) and one warm-up batch of `--per`, then exactly N requests, and exit.
// Run it under callgrind for N and 2N: (I(2N) − I(N)) / N is the instructions per request, a figure
// that does not depend on what else the machine runs. `--koa` counts bare Koa instead; in scenario
// (k) the limited key is counted, with `--unlimited` the key without. `--profile F` writes a CPU
// profile of the N requests to F (`node bench/lib/profile.mjs --areas F`).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Duplex } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { median } from './lib/alternate.mjs';
import { createScratchDatabase } from './lib/infra.mjs';
import { CLI_MAIN, importFrom, ROOT } from './lib/resolve.mjs';
import { infraUrls } from './lib/session.mjs';

const { values: opt } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'a' },
    stack: { type: 'string' },
    other: { type: 'string' },
    rounds: { type: 'string', default: '12' },
    per: { type: 'string', default: '3000' },
    connections: { type: 'string', default: '50' },
    count: { type: 'string' },
    koa: { type: 'boolean', default: false },
    unlimited: { type: 'boolean', default: false },
    profile: { type: 'string' },
    callgrind: { type: 'boolean', default: false },
  },
});
if (!['a', 'b', 'c', 'i', 'k'].includes(opt.scenario)) throw new Error(`--scenario a, b, c, i or k, got ${opt.scenario}`);
const rounds = Number(opt.rounds);
const per = Number(opt.per);
const counts = opt.connections.split(',').map(Number);
if (!counts.every((n) => Number.isInteger(n) && n > 0)) throw new Error(`--connections: positive whole numbers, got ${opt.connections}`);
const CONNECTIONS = Math.max(...counts);

const work = mkdtempSync(path.join(os.tmpdir(), 'cos-inprocess-'));
const file = path.join(work, 'bench.sqlite');
const stack = opt.stack ?? (opt.scenario === 'b' || opt.scenario === 'k' ? 'b' : 'a');
if (!['a', 'b'].includes(stack)) throw new Error(`--stack a or b, got ${stack}`);
const scratch = stack === 'b' ? await createScratchDatabase(infraUrls().databaseUrl) : null;
const storeEnv = scratch === null ? { DATABASE_URL: `sqlite:${file}` } : { DATABASE_URL: scratch.url, REDIS_URL: infraUrls().redisUrl, CREDENTIAL_CACHE: 'on' };
/** The organisation's limit of every scenario but (c): above any key's own (at most 1 000 000). */
const RAISED = '1000000000';
const cosAdmin = (...args) => {
  const res = spawnSync(process.execPath, [CLI_MAIN, ...args, '--json'], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn', RATE_LIMIT_PER_MINUTE: RAISED, ...storeEnv },
    encoding: 'utf8',
  });
  if (res.status !== 0) throw new Error(`cos-admin ${args.join(' ')} failed: ${res.stderr || res.stdout}`);
  return JSON.parse(res.stdout);
};
cosAdmin('migrate');
cosAdmin('bootstrap');
const orgId = cosAdmin('org', 'create', '--name', 'Bench Tenant', '--slug', 'bench-tenant').id;
const rawKey = cosAdmin('key', 'issue', orgId, '--label', 'bench').key;
const getWith = (key) => Buffer.from(`GET /v1/organisations/${orgId} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${key}\r\nAccept: */*\r\n\r\n`);
const getRequest = getWith(rawKey);
/** (k): the same GET through a key with its own limit, issued under the organisation's limit (its ceiling). */
const KEY_LIMIT = '1000000';
const limitedRequest = opt.scenario === 'k' ? getWith(cosAdmin('key', 'issue', orgId, '--label', 'bench limited', '--rate-limit', KEY_LIMIT).key) : null;
/** (i): the gateway's introspection of the tenant's key (as bench/run.mjs's introspectionFixture). */
function introspectRequest() {
  const gatewayOrg = cosAdmin('org', 'create', '--name', 'Bench Gateway', '--slug', 'bench-gateway', '--system').id;
  const gatewayKey = cosAdmin('key', 'issue', gatewayOrg, '--label', 'gateway', '--scopes', 'keys:introspect').key;
  const body = JSON.stringify({ token: rawKey });
  return Buffer.from(`POST /v1/introspect HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${gatewayKey}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nAccept: */*\r\n\r\n${body}`);
}
const request = opt.scenario === 'i' ? introspectRequest() : getRequest;
/** When the first batch started (null: not yet). */
let firstBatchAt = null;
/**
 * On Redis (scenarios b and k), the service's first call finds its slot's data missing and marks it
 * unsettled for the change bound (10 s by default): no credential cache entry fills until then, and
 * every request reads Postgres. After a first batch, measuring waits for the end of that bound.
 */
const settled = () => new Promise((resolve) => setTimeout(resolve, scratch === null ? 0 : Math.max(0, firstBatchAt + 11_000 - Date.now())));

/**
 * REDIS_TIMEOUT_MS from the environment, for runs under valgrind: a request there takes about 100
 * times as long, a Redis call outlives the default 50 ms bound, and every request then reads the
 * store instead of its cached credential.
 */
const redisTimeout = process.env.REDIS_TIMEOUT_MS ? { REDIS_TIMEOUT_MS: process.env.REDIS_TIMEOUT_MS } : {};

/** Closes each service's container (its pools) before the scratch database goes. */
const closers = [];

async function serviceServer(root) {
  const cli = await import(pathToFileURL(path.join(root, 'packages', 'cli', 'dist', 'index.js')).href);
  const env = { ...storeEnv, LOG_LEVEL: 'warn', RATE_LIMIT_PER_MINUTE: opt.scenario === 'c' ? '60' : RAISED, INTROSPECTION_RATE_LIMIT_PER_MINUTE: RAISED, ...redisTimeout };
  const config = cli.loadConfig(env);
  const logger = cli.createLogger({ level: 'warn', fd: 2 });
  const container = await cli.buildContainer(config, { logger });
  // A side's connections wait idle while the other sides run (long on a busy machine; at the larger
  // of several connection counts, some have sent nothing yet): a day's timeouts keep Node and the
  // listener's backstop from answering them 408 meanwhile.
  const day = 86_400_000;
  const timeouts = { keepAliveTimeoutMs: day, headersTimeoutMs: day, requestTimeoutMs: day };
  const running = await cli.listen(await container.getAsync(cli.CLI_TOKENS.HttpApp), '127.0.0.1', 0, logger, timeouts);
  closers.push(() => cli.closeContainer(container));
  return running.server;
}

async function bareKoaServer(body) {
  // As bench/baseline.mjs: the service's own Koa, and the bench's @koa/router.
  const { default: Koa } = await importFrom('adapter-koa', 'koa');
  const { Router } = await import('@koa/router');
  const http = await import('node:http');
  const app = new Koa();
  const router = new Router({ prefix: '/v1' });
  router.get('/organisations/:id', (ctx) => {
    ctx.body = body;
  });
  app.use(router.routes()).use(router.allowedMethods());
  return http.createServer(app.callback());
}

/** The batch in progress: requests sent, answers so far, answers wanted, and what to call when they are in. */
const batch = { sent: 0, answered: 0, wanted: 0, done: null };
const statuses = new Map();
let firstBody = null;

/** One client connection: the server writes into it; each complete answer sends the next request. */
class Connection extends Duplex {
  constructor(request) {
    super();
    this.request = request;
    this.pending = '';
    this.remoteAddress = '127.0.0.1';
    this.remotePort = 40000;
    this.remoteFamily = 'IPv4';
  }
  setTimeout() {
    return this;
  }
  setNoDelay() {
    return this;
  }
  setKeepAlive() {
    return this;
  }
  _read() {}
  _write(chunk, _enc, cb) {
    this.take(chunk.toString('latin1'));
    cb();
  }
  _writev(chunks, cb) {
    for (const c of chunks) this.take(typeof c.chunk === 'string' ? c.chunk : c.chunk.toString('latin1'));
    cb();
  }
  take(text) {
    this.pending += text;
    for (;;) {
      const end = this.pending.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = /content-length: (\d+)/i.exec(this.pending.slice(0, end));
      const size = end + 4 + (length ? Number(length[1]) : 0);
      if (this.pending.length < size) return;
      const status = this.pending.slice(9, 12);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      if (firstBody === null && status === '200') firstBody = this.pending.slice(end + 4, size);
      this.pending = this.pending.slice(size);
      batch.answered++;
      if (batch.answered >= batch.wanted) {
        const done = batch.done;
        batch.done = null;
        if (done !== null) setImmediate(done);
      } else if (batch.sent < batch.wanted) {
        batch.sent++;
        setImmediate(() => this.push(this.request));
      }
    }
  }
}

function connect(server, req = request) {
  // A side waits idle while the others run their batches: keep its connections open meanwhile
  // (Node's own keep-alive timer off).
  server.keepAliveTimeout = 0;
  const connections = [];
  for (let i = 0; i < CONNECTIONS; i++) {
    const c = new Connection(req);
    server.emit('connection', c);
    connections.push(c);
  }
  return connections;
}

/** Sends exactly `wanted` requests over the side's connections; the CPU time per answer. */
async function runBatch(side, wanted = per) {
  firstBatchAt ??= Date.now();
  batch.answered = 0;
  batch.wanted = wanted;
  batch.sent = Math.min(wanted, side.connections.length);
  const finished = new Promise((resolve) => (batch.done = resolve));
  const before = process.cpuUsage();
  for (const c of side.connections.slice(0, batch.sent)) c.push(c.request);
  await finished;
  const used = process.cpuUsage(before);
  return (used.user + used.system) / wanted;
}

/**
 * With `--callgrind` (under valgrind --tool=callgrind): callgrind_control zeroes the counts before
 * the N requests and dumps them after, so that dump holds those requests alone.
 */
async function callgrindControl(command) {
  if (!opt.callgrind) return;
  const { execFile } = await import('node:child_process');
  await new Promise((resolve, reject) => execFile('callgrind_control', [command, String(process.pid)], (err) => (err ? reject(err) : resolve())));
}

/** Runs `measure`, under V8's sampling profiler (200 µs) into `--profile` when given. */
async function profiled(measure) {
  if (opt.profile === undefined) return measure();
  const { Session } = await import('node:inspector/promises');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  const from = process.hrtime.bigint() / 1000n;
  const result = await measure();
  const to = process.hrtime.bigint() / 1000n;
  const { profile } = await session.post('Profiler.stop');
  // The profile's clock is hrtime's: the window marks the requests' samples, not stop's own work.
  // The CPU time per request (all threads) goes with it, to turn the areas' shares into µs.
  writeFileSync(opt.profile, JSON.stringify({ ...profile, measured: { from: Number(from), to: Number(to), requests: Number(opt.count), cpuUsPerRequest: result } }));
  session.disconnect();
  return result;
}

/** A side per server and connection count: the server's first N connections. */
const sidesOf = (name, connections) => counts.map((n) => ({ name: counts.length > 1 ? `${name} ×${n}` : name, connections: connections.slice(0, n) }));

try {
  const own = await serviceServer(ROOT);
  const sides = opt.scenario === 'k' ? keySides(own, path.basename(ROOT)) : sidesOf(`service (${path.basename(ROOT)})`, connect(own));
  if (opt.count !== undefined) {
    const counted = opt.scenario === 'k' && !opt.unlimited ? sides[counts.length] : sides[0];
    // Both batches before the N requests on the side counted: in (k) each key's path is as warm.
    await runBatch(counted);
    await settled();
    const side = opt.koa ? sidesOf('bare Koa', connect(await bareKoaServer(JSON.parse(firstBody)), getRequest))[0] : counted;
    await runBatch(side);
    await callgrindControl('--zero');
    const cpu = await profiled(() => runBatch(side, Number(opt.count)));
    await callgrindControl('--dump=measured');
    process.stdout.write(`scenario (${opt.scenario}), ${side.name}: 2 × ${per} + ${opt.count} requests on ${side.connections.length} connections, ${cpu.toFixed(1)} µs CPU/req, answers by status: ${JSON.stringify(Object.fromEntries(statuses))}\n`);
  } else await alternate(sides, own);
} finally {
  rmSync(work, { recursive: true, force: true });
  for (const close of closers) await close().catch(() => {});
  await scratch?.drop();
}
process.exit(0);

/** (k)'s sides of one service: the key without its own limit first, then the limited key's. */
function keySides(server, name) {
  return [...sidesOf(`key without (${name})`, connect(server)), ...sidesOf(`limited key (${name})`, connect(server, limitedRequest))];
}

async function alternate(sides, own) {
  if (opt.other !== undefined) {
    const other = await serviceServer(path.resolve(opt.other));
    const name = path.basename(path.resolve(opt.other));
    sides.push(...(opt.scenario === 'k' ? keySides(other, name) : sidesOf(`service (${name})`, connect(other))));
  }
  // The JSON the service answered, for bare Koa to answer the same (scenario c's first 60 are 200s).
  if (opt.scenario === 'i') {
    await runBatch(sides[0]);
    if (!firstBody?.startsWith('{"active":true')) throw new Error(`the introspection answered ${firstBody}`);
    firstBody = null;
    sides.push(...sidesOf(`service GET (${stack})`, connect(own, getRequest)));
  }
  await runBatch(sides.at(-1));
  await settled();
  if (firstBody === null) throw new Error('the service answered no 200 with the organisation');
  sides.push(...sidesOf('bare Koa', connect(await bareKoaServer(JSON.parse(firstBody)), getRequest)));
  for (const side of sides) {
    side.runs = [];
    await runBatch(side);
    await runBatch(side);
  }
  for (let r = 0; r < rounds; r++) for (const side of sides) side.runs.push(await runBatch(side));
  process.stdout.write(`scenario (${opt.scenario}), ${rounds} rounds of ${per} requests per side, ${opt.connections} connections, load average ${os.loadavg()[0].toFixed(1)}\n`);
  for (const side of sides) {
    process.stdout.write(`  ${side.name.padEnd(34)} ${median(side.runs).toFixed(1).padStart(6)} µs CPU/req (median; rounds ${side.runs.map((v) => v.toFixed(1)).join(' ')})\n`);
  }
  const [first] = sides;
  for (const side of sides.slice(1)) {
    process.stdout.write(`  ${side.name} / ${first.name}: ${median(side.runs.map((v, i) => v / first.runs[i])).toFixed(3)} (median of per-round ratios)\n`);
  }
  process.stdout.write(`  answers by status: ${JSON.stringify(Object.fromEntries(statuses))}\n`);
}
