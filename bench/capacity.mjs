#!/usr/bin/env node
// The capacity model's figures (docs/scaling.md): what one instance, one Redis and one Postgres do
// per request, on Postgres + Redis, request kind by request kind.
//
//   pnpm build && node bench/capacity.mjs            full run (~6-8 min), prints the figures
//   node bench/capacity.mjs --quick                  smoke run (~2 min), shorter runs, fewer rows
//   node bench/capacity.mjs --write                  also rewrites the generated block of docs/scaling.md
//   node bench/capacity.mjs --json out.json          also writes every raw figure as JSON
//
// Needs Postgres and Redis (TEST_DATABASE_URL, TEST_REDIS_URL; a Redis no one else uses, since its
// INFO counters are server-wide). Works in a scratch database it drops afterwards.
//
// Two kinds of figure:
// - counts, which do not depend on how loaded the machine is: per request kind, a fixed number of
//   requests through a service whose Postgres connections go through a counting proxy in this
//   process (every Execute and simple Query message, classified by its SQL's verb and table), with
//   Redis `INFO commandstats` / `INFO stats` deltas around the same requests;
// - rates: the same kinds under load (wrk, or autocannon, for reads; a closed loop of keep-alive
//   requests from this process for writes, which need a body or a fresh key id each), through a
//   service connected to Postgres directly, with the CPU time of the service, of Redis (INFO cpu)
//   and of the database's Postgres backends (/proc) per request. CPU per request is the steady
//   figure on a shared machine; requests/s per core is its inverse.
// Then the idle (background) load of one instance, the Redis keys and memory per organisation and
// the credential cache's memory after filling it, and four instances on one Postgres and one Redis.
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { median } from './lib/alternate.mjs';
import { checkPostgres, checkRedis, createScratchDatabase, DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL } from './lib/infra.mjs';
import { detectLoadGenerator, runLoad } from './lib/load.mjs';
import { cosAdmin, cpuSecondsOf, startBaseline, startService } from './lib/procs.mjs';
import { CLI_MAIN, importBuilt, importFrom, ROOT } from './lib/resolve.mjs';
import { seedOrganisations } from './lib/seed.mjs';

const argv = process.argv.slice(2).filter((a) => a !== '--');
const { values: opt } = parseArgs({
  args: argv,
  options: {
    quick: { type: 'boolean', default: false },
    write: { type: 'boolean', default: false },
    json: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const S = {
  durationS: opt.quick ? 3 : 6,
  rounds: opt.quick ? 1 : 3,
  warmupS: opt.quick ? 1 : 3,
  connections: 32,
  writeConcurrency: 8,
  countReads: opt.quick ? 500 : 2_000,
  countWrites: opt.quick ? 100 : 300,
  listOrganisations: 1_000,
  memoryOrganisations: opt.quick ? 1_000 : 5_000,
  idleS: opt.quick ? 11 : 31,
  fourDurationS: opt.quick ? 4 : 8,
};
const RAISED = '1000000000';
const started = Date.now();
const log = (line = '') => process.stdout.write(`${line}\n`);
const step = (line) => log(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const load1 = () => Number(os.loadavg()[0].toFixed(1));

if (!existsSync(CLI_MAIN)) {
  console.error('capacity: packages/cli/dist/main.js is missing; run pnpm build first.');
  process.exit(2);
}

// ---------- a Postgres wire-protocol proxy that counts statements ----------

/**
 * Listens on a free loopback port and forwards each connection to `upstream` (host, port), counting
 * what the client sends: each Execute (extended protocol: the SQL of the statement its portal was
 * bound to) and each simple Query is one statement, classified by `classify(sql)`. Bytes both ways.
 */
async function startCountingProxy(upstream) {
  const counts = { statements: 0, bytesIn: 0, bytesOut: 0, byKind: new Map() };
  const sockets = new Set();
  const bump = (sql) => {
    counts.statements++;
    const kind = classify(sql);
    counts.byKind.set(kind, (counts.byKind.get(kind) ?? 0) + 1);
  };
  const server = net.createServer((client) => {
    const db = net.connect(upstream.port, upstream.host);
    sockets.add(client);
    sockets.add(db);
    const statements = new Map(); // prepared statement name -> SQL ('' = the unnamed one)
    const portals = new Map(); // portal name -> SQL
    let buf = Buffer.alloc(0);
    let startup = true;
    const cstr = (b, at) => {
      const end = b.indexOf(0, at);
      return [b.toString('utf8', at, end), end + 1];
    };
    client.on('data', (chunk) => {
      counts.bytesOut += chunk.length;
      db.write(chunk);
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      for (;;) {
        if (startup) {
          if (buf.length < 8) break;
          const len = buf.readInt32BE(0);
          if (buf.length < len) break;
          const code = buf.readInt32BE(4);
          // SSLRequest / GSSENCRequest come before the real startup message
          if (code !== 80877103 && code !== 80877104) startup = false;
          buf = buf.subarray(len);
          continue;
        }
        if (buf.length < 5) break;
        const len = buf.readInt32BE(1);
        if (buf.length < 1 + len) break;
        const type = String.fromCharCode(buf[0]);
        const body = buf.subarray(5, 1 + len);
        if (type === 'P') {
          const [name, at] = cstr(body, 0);
          statements.set(name, cstr(body, at)[0]);
        } else if (type === 'B') {
          const [portal, at] = cstr(body, 0);
          portals.set(portal, statements.get(cstr(body, at)[0]) ?? '?');
        } else if (type === 'E') {
          bump(portals.get(cstr(body, 0)[0]) ?? '?');
        } else if (type === 'Q') {
          bump(cstr(body, 0)[0]);
        }
        buf = buf.subarray(1 + len);
      }
    });
    db.on('data', (chunk) => {
      counts.bytesIn += chunk.length;
      client.write(chunk);
    });
    const close = () => {
      client.destroy();
      db.destroy();
      sockets.delete(client);
      sockets.delete(db);
    };
    client.on('error', close).on('close', close);
    db.on('error', close).on('close', close);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: server.address().port,
    snapshot: () => ({ statements: counts.statements, bytesIn: counts.bytesIn, bytesOut: counts.bytesOut, byKind: new Map(counts.byKind) }),
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** "INSERT audit_entries", "SELECT api_keys", "BEGIN", …: the verb and the first table named. */
function classify(sql) {
  const s = sql.replace(/\s+/g, ' ').trim();
  const verb = (/^\w+/.exec(s)?.[0] ?? '?').toUpperCase();
  if (['BEGIN', 'COMMIT', 'ROLLBACK', 'SET', 'SAVEPOINT', 'RELEASE'].includes(verb)) return verb;
  const table =
    verb === 'INSERT'
      ? /insert into "?(\w+)/i.exec(s)?.[1]
      : verb === 'UPDATE'
        ? /update "?(\w+)/i.exec(s)?.[1]
        : verb === 'DELETE'
          ? /delete from "?(\w+)/i.exec(s)?.[1]
          : /\bfrom "?(\w+)/i.exec(s)?.[1];
  const lock = /for update/i.test(s) ? ' FOR UPDATE' : '';
  const fn = verb === 'SELECT' && table === undefined ? /^select\s+(\w+)\s*\(/i.exec(s)?.[1] : undefined;
  return `${verb} ${table ?? (fn ? `${fn}()` : '?')}${lock}`;
}

function diffCounts(a, b) {
  const byKind = new Map();
  for (const [k, v] of b.byKind) {
    const d = v - (a.byKind.get(k) ?? 0);
    if (d) byKind.set(k, d);
  }
  return { statements: b.statements - a.statements, bytesIn: b.bytesIn - a.bytesIn, bytesOut: b.bytesOut - a.bytesOut, byKind };
}

// ---------- Redis and Postgres observations ----------

async function redisObserver(url) {
  const { createClient } = await importFrom('limiter-redis', 'redis');
  const client = createClient({ url });
  client.on('error', () => {});
  await client.connect();
  const parse = (text) => Object.fromEntries(text.split('\r\n').filter((l) => l.includes(':') && !l.startsWith('#')).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]));
  return {
    client,
    /** Command calls (without this observer's own INFO), network bytes and CPU seconds so far. */
    async snapshot() {
      const all = parse(await client.info('all'));
      const commands = new Map();
      for (const [k, v] of Object.entries(all)) {
        if (!k.startsWith('cmdstat_')) continue;
        const name = k.slice('cmdstat_'.length);
        if (name === 'info') continue;
        commands.set(name, Number(/calls=(\d+)/.exec(v)[1]));
      }
      return {
        commands,
        netIn: Number(all.total_net_input_bytes),
        netOut: Number(all.total_net_output_bytes),
        cpu: Number(all.used_cpu_user) + Number(all.used_cpu_sys),
        usedMemory: Number(all.used_memory),
        keys: Number(/keys=(\d+)/.exec(all.db0 ?? '')?.[1] ?? 0),
        version: all.redis_version,
      };
    },
    close: () => client.close?.() ?? client.quit(),
  };
}

function diffRedis(a, b) {
  const commands = new Map();
  for (const [k, v] of b.commands) {
    const d = v - (a.commands.get(k) ?? 0);
    if (d) commands.set(k, d);
  }
  // INFO's own request and answer are in the byte counters: one INFO per snapshot, subtracted roughly
  // by the caller comparing with an empty interval (see idleRedisBytes).
  return { commands, netIn: b.netIn - a.netIn, netOut: b.netOut - a.netOut, cpu: b.cpu - a.cpu, usedMemory: b.usedMemory - a.usedMemory, keys: b.keys - a.keys };
}

/** CPU seconds of every Postgres backend connected to `database` (the service's pool), by /proc. */
async function postgresObserver(adminUrl, database) {
  const { default: pg } = await importFrom('store-sql', 'pg');
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const seen = new Map(); // pid -> cpu seconds at the first sighting (0 for backends started since the baseline)
  let baseline = null;
  const pids = async () => (await admin.query('select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [database])).rows.map((r) => r.pid);
  return {
    /** Starts an interval: the CPU of the backends alive now. */
    async begin() {
      baseline = new Map();
      for (const pid of await pids()) baseline.set(pid, cpuSecondsOf(pid) ?? 0);
      seen.clear();
    },
    /** Ends it: CPU the database's backends used since begin() (backends that exited meanwhile are missed). */
    async end() {
      let total = 0;
      for (const pid of await pids()) {
        const now = cpuSecondsOf(pid);
        if (now === null) continue;
        total += now - (baseline.get(pid) ?? 0);
      }
      return total;
    },
    close: () => admin.end(),
  };
}

// ---------- HTTP drivers ----------

const agentFor = (max) => new http.Agent({ keepAlive: true, maxSockets: max });

function request(agent, base, { method, path: p, authorization, body }) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = http.request(
      `${base}${p}`,
      {
        agent,
        method,
        headers: { authorization, ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}) },
      },
      (res) => {
        const parts = [];
        res.on('data', (c) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(parts).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * `concurrency` loops each sending `next()`'s request (null: this loop stops) until `until()`; every
 * answer must have the status `expect`. Returns requests, wrong answers, latencies.
 */
async function closedLoop({ base, concurrency, next, expect, until, onAnswer, tolerate503 = false }) {
  const agent = agentFor(concurrency);
  let requests = 0;
  let wrong = 0;
  let unavailable = 0;
  let firstWrong = null;
  const latencies = [];
  const loops = Array.from({ length: concurrency }, async (_, slot) => {
    while (!until()) {
      const r = next(slot);
      if (r === null) return;
      const t = performance.now();
      let res;
      try {
        res = await request(agent, base, r);
      } catch (err) {
        wrong++;
        firstWrong ??= err.message;
        continue;
      }
      latencies.push(performance.now() - t);
      requests++;
      if (res.status === 503 && tolerate503) unavailable++;
      else if (res.status !== expect) {
        wrong++;
        firstWrong ??= `HTTP ${res.status}: ${res.text.slice(0, 200)}`;
      } else onAnswer?.(res, r);
    }
  });
  const t0 = performance.now();
  await Promise.all(loops);
  const seconds = (performance.now() - t0) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const q = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
  return { requests, wrong, unavailable, firstWrong, seconds, rps: (requests - unavailable) / seconds, p50Ms: q(0.5), p99Ms: q(0.99) };
}

// ---------- the run ----------

const generator = detectLoadGenerator();
const dbUrl = process.env.TEST_DATABASE_URL || DEFAULT_DATABASE_URL;
const redisUrl = process.env.TEST_REDIS_URL || DEFAULT_REDIS_URL;
const work = mkdtempSync(path.join(os.tmpdir(), 'cos-capacity-'));
const running = new Set();
const cleanups = [];
const result = {
  startedAt: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  mode: opt.quick ? 'quick' : 'full',
  settings: S,
  machine: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model?.trim(), memGiB: Math.round(os.totalmem() / 2 ** 30), node: process.versions.node },
  loadGenerator: `${generator.name} ${generator.version}`,
  counts: [],
  rates: [],
  idle: null,
  memory: null,
  four: null,
};

async function start(options) {
  const p = await startService(options);
  running.add(p);
  return p;
}
async function stop(p) {
  if (!p) return;
  running.delete(p);
  await p.stop();
}
process.on('SIGINT', async () => {
  for (const p of running) await p.stop().catch(() => {});
  process.exit(130);
});

let exitCode = 0;
try {
  const [pg, redis] = await Promise.all([checkPostgres(dbUrl), checkRedis(redisUrl)]);
  if (!pg.ok || !redis.ok) throw new Error([pg.reason, redis.reason].filter(Boolean).join('; '));
  result.infra = `${pg.version}, ${redis.version}, both on this machine`;
  log(`cos capacity — ${result.mode} run; ${result.machine.cpus} × ${result.machine.cpuModel}; Node ${result.machine.node}; ${result.loadGenerator}; ${result.infra}; load average ${load1()}`);

  const scratch = await createScratchDatabase(dbUrl);
  cleanups.push(() => scratch.drop());
  const env = { DATABASE_URL: scratch.url, REDIS_URL: redisUrl };
  step(`setting up ${scratch.name} with cos-admin (migrate, bootstrap, org create, key issue) and ${S.listOrganisations} filler organisations`);
  cosAdmin(['migrate'], env);
  const boot = cosAdmin(['bootstrap'], env);
  const platformKey = JSON.stringify(boot).match(/svc_live_[A-Za-z0-9]{48}/)?.[0];
  const orgId = cosAdmin(['org', 'create', '--name', 'Capacity Tenant', '--slug', 'capacity-tenant'], env).id;
  const tenantKey = JSON.stringify(cosAdmin(['key', 'issue', orgId, '--label', 'capacity'], env)).match(/svc_live_[A-Za-z0-9]{48}/)?.[0];
  if (!platformKey || !orgId || !tenantKey) throw new Error('bootstrap / org create / key issue printed no key or id');
  await seedOrganisations(scratch.url, { total: S.listOrganisations });
  const platform = `Bearer ${platformKey}`;
  const tenant = `Bearer ${tenantKey}`;

  const serviceEnv = (cache, databaseUrl = scratch.url) => ({
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    RATE_LIMIT_PER_MINUTE: RAISED,
    MAX_ACTIVE_KEYS_PER_ORG: '100000000',
    CREDENTIAL_CACHE: cache,
  });
  const pgUrl = new URL(scratch.url);
  const upstream = { host: pgUrl.hostname, port: Number(pgUrl.port || 5432) };
  const viaProxy = (port) => {
    const u = new URL(scratch.url);
    u.host = `127.0.0.1:${port}`;
    return u.toString();
  };

  const observer = await redisObserver(redisUrl);
  cleanups.push(() => observer.close());
  const pgObserver = await postgresObserver(dbUrl, scratch.name);
  cleanups.push(() => pgObserver.close());

  // Keys issued by the write runs, revoked by the revoke runs (each DELETE revokes a live key).
  const issued = [];
  // Writes go to `writeOrgs` organisations, one per concurrent loop: an organisation's audit chain
  // takes its appends one at a time (a lock per organisation), which one organisation's writers
  // would queue on; the single-organisation figure is in the counts' latency.
  const writeOrgs = (await listOrganisationIds(scratch.url, S.writeConcurrency)).filter((id) => id !== orgId);
  writeOrgs.unshift(orgId);
  writeOrgs.length = S.writeConcurrency;
  const issueReq = (slot) => ({ method: 'POST', path: `/v1/organisations/${writeOrgs[slot]}/api-keys`, authorization: platform, body: { label: `capacity ${issued.length}` } });
  const onIssued = (res, req) => issued.push(`${req.path}/${JSON.parse(res.text).id}`);
  const revokeReq = () => {
    const p = issued.shift();
    return p === undefined ? null : { method: 'DELETE', path: p, authorization: platform };
  };
  const KINDS = [
    { id: 'get', title: 'GET own organisation, cache on', cache: 'on', read: { path: `/v1/organisations/${orgId}`, authorization: tenant } },
    { id: 'koa', title: 'bare Koa + @koa/router answering the same JSON from memory (the machine, for calibration)', cache: 'koa', read: { path: `/v1/organisations/${orgId}`, authorization: tenant } },
    { id: 'get-off', title: 'GET own organisation, cache off', cache: 'off', read: { path: `/v1/organisations/${orgId}`, authorization: tenant } },
    { id: 'list', title: `list organisations (first page of 20 of ${S.listOrganisations + 2})`, cache: 'on', read: { path: '/v1/organisations?limit=20', authorization: platform } },
    { id: 'issue-one', title: `key issue, one organisation, ${S.writeConcurrency} concurrent (its audit chain takes one append at a time)`, cache: 'on', rateOnly: true, write: { next: () => issueReq(0), expect: 201, onAnswer: onIssued } },
    { id: 'issue', title: `key issue (POST …/api-keys), ${S.writeConcurrency} organisations`, cache: 'on', write: { next: issueReq, expect: 201, onAnswer: onIssued } },
    { id: 'revoke', title: `key revoke (DELETE …/api-keys/{id}), ${S.writeConcurrency} organisations`, cache: 'on', write: { next: revokeReq, expect: 204 } },
  ];

  const bodyFile = path.join(work, 'organisation.json');
  // --- counts: a fixed number of requests per kind through the counting proxy ---
  const proxy = await startCountingProxy(upstream);
  cleanups.push(() => proxy.close());
  for (const cache of ['on', 'off']) {
    const svc = await start({ name: `count-${cache}`, env: serviceEnv(cache, viaProxy(proxy.port)), logFile: path.join(work, `count-${cache}.log`) });
    try {
      // Warm: connections opened, statements prepared, the cache filled, the slot's markers set.
      for (const kind of KINDS.filter((k) => k.read && k.cache === cache)) {
        await closedLoop({ base: svc.base, concurrency: 4, next: () => ({ method: 'GET', ...kind.read }), expect: 200, until: ((n) => () => n-- <= 0)(200), onAnswer: (res) => kind.id === 'get' && writeFileSync(bodyFile, res.text) });
      }
      if (cache === 'on') await sleep(11_000); // past the change bound of a slot Redis had not served
      for (const kind of KINDS.filter((k) => k.cache === cache && !k.rateOnly)) {
        const n = kind.read ? S.countReads : S.countWrites;
        let left = n;
        const next = kind.read ? () => ({ method: 'GET', ...kind.read }) : kind.write.next;
        // a warm-up of the same kind (prepared statements, the cache), not counted
        if (kind.read) await closedLoop({ base: svc.base, concurrency: 8, next, expect: 200, until: ((m) => () => m-- <= 0)(100) });
        const r0 = await observer.snapshot();
        const p0 = proxy.snapshot();
        const c0 = svc.cpuSeconds();
        const run = await closedLoop({ base: svc.base, concurrency: 8, next, expect: kind.read ? 200 : kind.write.expect, onAnswer: kind.write?.onAnswer, until: () => left-- <= 0 });
        const c1 = svc.cpuSeconds();
        const p1 = proxy.snapshot();
        const r1 = await observer.snapshot();
        if (run.wrong > 0) throw new Error(`${kind.title}: ${run.wrong} wrong answers (first: ${run.firstWrong})`);
        const row = { id: kind.id, title: kind.title, requests: run.requests, redis: diffRedis(r0, r1), pg: diffCounts(p0, p1), serviceCpuUs: ((c1 - c0) * 1e6) / run.requests };
        result.counts.push(row);
        const per = (x) => (x / run.requests).toFixed(2);
        log(`  ${kind.title}: ${run.requests} requests; Redis ${per([...row.redis.commands.values()].reduce((a, b) => a + b, 0))} commands, ${per(row.redis.netIn)} B in, ${per(row.redis.netOut)} B out; Postgres ${per(row.pg.statements)} statements (${[...row.pg.byKind].map(([k, v]) => `${k} ${per(v)}`).join(', ')})`);
      }
      if (cache === 'on') {
        // --- idle: what one instance does with no request at all (heartbeats, the outbox poll) ---
        step(`idle: one instance, no requests, ${S.idleS} s`);
        const r0 = await observer.snapshot();
        const p0 = proxy.snapshot();
        const c0 = svc.cpuSeconds();
        const t0 = performance.now();
        await sleep(S.idleS * 1000);
        const seconds = (performance.now() - t0) / 1000;
        const c1 = svc.cpuSeconds();
        const p1 = proxy.snapshot();
        const r1 = await observer.snapshot();
        result.idle = { seconds, redis: diffRedis(r0, r1), pg: diffCounts(p0, p1), serviceCpuS: c1 - c0 };
        const perMin = (x) => ((x * 60) / seconds).toFixed(1);
        log(`  per minute: Postgres ${perMin(result.idle.pg.statements)} statements (${[...result.idle.pg.byKind].map(([k, v]) => `${k} ${perMin(v)}`).join(', ')}); Redis ${perMin([...result.idle.redis.commands.values()].reduce((a, b) => a + b, 0))} commands`);
      }
    } finally {
      await stop(svc);
    }
  }
  await proxy.close();
  if (issued.length) log(`  (${issued.length} keys issued by the counts left live)`);
  issued.length = 0;

  // --- rates: each kind under load, the service on Postgres directly ---
  for (const cache of ['on', 'off', 'koa']) {
    const logFile = path.join(work, `rate-${cache}.log`);
    const svc = cache === 'koa' ? await startBaseline({ bodyFile, logFile }) : await start({ name: `rate-${cache}`, env: serviceEnv(cache), logFile });
    if (cache === 'koa') running.add(svc);
    let seenWarnings = {};
    try {
      if (cache === 'on') {
        await closedLoop({ base: svc.base, concurrency: 4, next: () => ({ method: 'GET', path: `/v1/organisations/${orgId}`, authorization: tenant }), expect: 200, until: ((n) => () => n-- <= 0)(100) });
        await sleep(11_000);
      }
      for (const kind of KINDS.filter((k) => k.cache === cache)) {
        step(`rate: ${kind.title}`);
        const runs = [];
        const once = async (seconds) => {
          const la = load1();
          const r0 = await observer.snapshot();
          await pgObserver.begin();
          const c0 = svc.cpuSeconds();
          let r;
          if (kind.read) {
            r = await runLoad(generator, { url: `${svc.base}${kind.read.path}`, durationS: seconds, connections: S.connections, authorization: kind.read.authorization });
            if (r.errors > 0 || r.non2xx > 0) throw new Error(`${kind.title}: ${r.errors} socket errors, ${r.non2xx} non-2xx of ${r.requests}`);
          } else {
            const deadline = performance.now() + seconds * 1000;
            r = await closedLoop({ base: svc.base, concurrency: S.writeConcurrency, next: kind.write.next, expect: kind.write.expect, onAnswer: kind.write.onAnswer, until: () => performance.now() >= deadline, tolerate503: true });
            if (r.wrong > 0) throw new Error(`${kind.title}: ${r.wrong} wrong answers (first: ${r.firstWrong})`);
          }
          const c1 = svc.cpuSeconds();
          const pgCpu = await pgObserver.end();
          const r1 = await observer.snapshot();
          const out = {
            rps: r.rps,
            requests: r.requests,
            p50Ms: r.p50Ms,
            p99Ms: r.p99Ms,
            serviceCpuUs: ((c1 - c0) * 1e6) / r.requests,
            redisCpuUs: ((r1.cpu - r0.cpu) * 1e6) / r.requests,
            pgCpuUs: (pgCpu * 1e6) / r.requests,
            load: la,
            unavailable: r.unavailable ?? 0,
          };
          return out;
        };
        await once(S.warmupS);
        for (let i = 0; i < S.rounds; i++) {
          if (kind.id === 'revoke' && issued.length < 100) break;
          const r = await once(S.durationS);
          runs.push(r);
          log(`    ${r.rps.toFixed(0).padStart(6)} req/s  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms  CPU/req: service ${r.serviceCpuUs.toFixed(0)} µs, Redis ${r.redisCpuUs.toFixed(1)} µs, Postgres ${r.pgCpuUs.toFixed(0)} µs  (load ${r.load})${r.unavailable ? `; ${r.unavailable} answered 503` : ''}`);
        }
        const m = (f) => median(runs.map(f));
        const now = warningsIn(logFile);
        const warnings = Object.fromEntries(Object.entries(now).map(([m, c]) => [m, c - (seenWarnings[m] ?? 0)]).filter(([, c]) => c > 0));
        seenWarnings = now;
        result.rates.push({
          warnings,
          id: kind.id,
          title: kind.title,
          runs,
          rps: m((r) => r.rps),
          p50Ms: m((r) => r.p50Ms),
          p99Ms: m((r) => r.p99Ms),
          serviceCpuUs: m((r) => r.serviceCpuUs),
          redisCpuUs: m((r) => r.redisCpuUs),
          pgCpuUs: m((r) => r.pgCpuUs),
          loads: runs.map((r) => r.load),
          unavailable: runs.reduce((a, r) => a + r.unavailable, 0),
          driver: kind.read ? `${generator.name}, ${S.connections} connections` : `closed loop, ${S.writeConcurrency} concurrent`,
        });
      }
    } finally {
      await stop(svc);
    }
  }

  // --- Redis keys and memory per organisation, and the credential cache's memory ---
  step(`memory: ${S.memoryOrganisations} organisations with one key each, one request per key, twice`);
  {
    const orgKeys = await seedOrganisationsWithKeys(scratch.url, S.memoryOrganisations);
    const svc = await start({ name: 'memory', env: serviceEnv('on'), logFile: path.join(work, 'memory.log') });
    try {
      const rss0 = svc.memory().rssMiB;
      const m0 = await observer.snapshot();
      const pass = async () => {
        let i = 0;
        const r = await closedLoop({
          base: svc.base,
          concurrency: 8,
          next: () => (i < orgKeys.length ? ((k) => ({ method: 'GET', path: `/v1/organisations/${k.orgId}`, authorization: `Bearer ${k.key}` }))(orgKeys[i++]) : null),
          expect: 200,
          until: () => false,
        });
        if (r.wrong > 0) throw new Error(`memory pass: ${r.wrong} wrong answers (first: ${r.firstWrong})`);
      };
      await pass();
      const m1 = await observer.snapshot();
      // New slots are not settled for the change bound: the second pass, after it, fills the cache.
      await sleep(11_000);
      await pass();
      await pass();
      const m2 = await observer.snapshot();
      const rss1 = svc.memory().rssMiB;
      const keys = await redisKeyCensus(observer.client);
      result.memory = {
        organisations: orgKeys.length,
        redisFirstPass: diffRedis(m0, m1),
        redisAfter: diffRedis(m0, m2),
        keys,
        serviceRssMiB: { before: rss0, after: rss1 },
      };
      log(`  Redis: +${(m2.usedMemory - m0.usedMemory).toLocaleString('en-US')} B used_memory, +${m2.keys - m0.keys} keys for ${orgKeys.length} organisations; service RSS ${rss0.toFixed(0)} → ${rss1.toFixed(0)} MiB`);
      for (const k of keys) log(`    ${k.pattern}: ${k.count} keys, ${k.avgBytes.toFixed(0)} B each (MEMORY USAGE), TTL ${k.ttl}`);
    } finally {
      await stop(svc);
    }
  }

  // --- four instances on one Postgres and one Redis, the load spread over their ports ---
  step('four instances, GET own organisation (cache on), one wrk per instance');
  {
    const svcs = [];
    try {
      for (let i = 0; i < 4; i++) svcs.push(await start({ name: `four-${i}`, env: serviceEnv('on'), logFile: path.join(work, `four-${i}.log`) }));
      const url = (s) => `${s.base}/v1/organisations/${orgId}`;
      await Promise.all(svcs.map((s) => closedLoop({ base: s.base, concurrency: 2, next: () => ({ method: 'GET', path: `/v1/organisations/${orgId}`, authorization: tenant }), expect: 200, until: ((n) => () => n-- <= 0)(50) })));
      await sleep(1_000);
      const perConn = Math.max(1, Math.round(S.connections / 4));
      const runs = [];
      for (let round = 0; round <= S.rounds; round++) {
        const warm = round === 0;
        const la = load1();
        const r0 = await observer.snapshot();
        await pgObserver.begin();
        const c0 = svcs.map((s) => s.cpuSeconds());
        const rs = await Promise.all(svcs.map((s) => runLoad(generator, { url: url(s), durationS: warm ? 2 * S.warmupS : S.fourDurationS, connections: perConn, authorization: tenant })));
        const c1 = svcs.map((s) => s.cpuSeconds());
        const pgCpu = await pgObserver.end();
        const r1 = await observer.snapshot();
        const errors = rs.reduce((a, r) => a + r.errors + r.non2xx, 0);
        if (errors > 0) throw new Error(`four instances: ${errors} errors or non-2xx answers`);
        if (warm) continue;
        const seconds = median(rs.map((r) => r.durationS));
        const requests = rs.reduce((a, r) => a + r.requests, 0);
        const run = {
          totalRps: rs.reduce((a, r) => a + r.rps, 0),
          perInstanceRps: rs.map((r) => r.rps),
          p99Ms: rs.map((r) => r.p99Ms),
          requests,
          serviceCpuCores: c1.reduce((a, c, i) => a + (c - c0[i]), 0) / seconds,
          serviceCpuUs: (c1.reduce((a, c, i) => a + (c - c0[i]), 0) * 1e6) / requests,
          redisCpuCores: (r1.cpu - r0.cpu) / seconds,
          redisCpuUs: ((r1.cpu - r0.cpu) * 1e6) / requests,
          pgCpuCores: pgCpu / seconds,
          redisCommandsPerS: [...diffRedis(r0, r1).commands.values()].reduce((a, b) => a + b, 0) / seconds,
          errors,
          load: la,
        };
        runs.push(run);
        log(`    total ${run.totalRps.toFixed(0)} req/s (${run.perInstanceRps.map((x) => x.toFixed(0)).join(' + ')}); CPU cores: services ${run.serviceCpuCores.toFixed(2)}, Redis ${run.redisCpuCores.toFixed(2)}, Postgres ${run.pgCpuCores.toFixed(3)}; ${run.redisCommandsPerS.toFixed(0)} Redis commands/s; 0 errors (load ${la})`);
      }
      const m = (f) => median(runs.map(f));
      result.four = {
        connectionsPerInstance: perConn,
        runs,
        totalRps: m((r) => r.totalRps),
        serviceCpuUs: m((r) => r.serviceCpuUs),
        redisCpuUs: m((r) => r.redisCpuUs),
        serviceCpuCores: m((r) => r.serviceCpuCores),
        redisCpuCores: m((r) => r.redisCpuCores),
        pgCpuCores: m((r) => r.pgCpuCores),
        loads: runs.map((r) => r.load),
      };
      result.four.warnLines = svcs.map((s) => warningsIn(s.logFile));
    } finally {
      for (const s of svcs) await stop(s);
    }
  }
} catch (err) {
  exitCode = 1;
  log(`\ncapacity: ${err.stack || err.message}`);
} finally {
  for (const p of [...running]) await stop(p).catch(() => {});
  for (const c of cleanups.reverse()) await c().catch((e) => log(`cleanup: ${e.message}`));
}

result.finishedAt = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
result.totalSeconds = (Date.now() - started) / 1000;
const markdown = render(result);
log('');
log(markdown);
if (opt.json) writeFileSync(opt.json, JSON.stringify(result, (k, v) => (v instanceof Map ? Object.fromEntries(v) : v), 2));
if (opt.write && exitCode === 0) {
  writeBlock(path.join(ROOT, 'docs', 'scaling.md'), markdown);
  log('\nwrote docs/scaling.md');
}
if (!opt.keep) rmSync(work, { recursive: true, force: true });
else log(`scratch directory kept: ${work}`);
process.exit(exitCode);

// ---------- helpers used above ----------

/**
 * `n` organisations with one real live key each, inserted through the store's knex in a few
 * statements (the core's own key functions; the raw keys stay in this process).
 */
async function seedOrganisationsWithKeys(databaseUrl, n) {
  const { createSqlStore } = await importBuilt('store-sql');
  const { generateRawKey, digestKey, keyPrefixOf } = await importBuilt('core');
  const random = { bytes: (k) => randomBytes(k), uuid: () => randomUUID() };
  const store = createSqlStore({ databaseUrl, statementTimeoutMs: 600_000 });
  const out = [];
  try {
    const at = Date.UTC(2025, 0, 1);
    for (let i = 0; i < n; i++) out.push({ orgId: randomUUID(), keyId: randomUUID(), key: generateRawKey('live', random) });
    await store.knex.transaction(async (trx) => {
      for (let s = 0; s < n; s += 500) {
        const chunk = out.slice(s, s + 500);
        await trx('organisations').insert(chunk.map((k, j) => ({ id: k.orgId, name: `Memory organisation ${s + j}`, slug: `memory-${s + j}`, industry_section: null, is_system: false, created_at: at + s + j, updated_at: at + s + j })));
        await trx('api_keys').insert(chunk.map((k, j) => ({ id: k.keyId, organisation_id: k.orgId, label: 'memory', key_prefix: keyPrefixOf(k.key), digest: digestKey(k.key), expires_at: null, created_at: at + s + j, revoked_at: null })));
      }
    });
  } finally {
    await store.close();
  }
  return out;
}

/** The warning and error lines of a service's log, counted by message. */
function warningsIn(logFile) {
  const counts = {};
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    if (!/"level":"(warn|error|fatal)"/.test(line)) continue;
    const msg = /"msg":"([^"]*)"/.exec(line)?.[1] ?? line.slice(0, 80);
    counts[msg] = (counts[msg] ?? 0) + 1;
  }
  return counts;
}

/** `n` organisation ids (the filler ones first), read through the store's knex. */
async function listOrganisationIds(databaseUrl, n) {
  const { createSqlStore } = await importBuilt('store-sql');
  const store = createSqlStore({ databaseUrl });
  try {
    return (await store.knex('organisations').select('id').where('is_system', false).orderBy('slug').limit(n)).map((r) => String(r.id));
  } finally {
    await store.close();
  }
}

/** Every key in Redis, grouped by its shape (ids and numbers replaced), with MEMORY USAGE and TTL. */
async function redisKeyCensus(client) {
  const groups = new Map();
  for await (const batch of client.scanIterator({ COUNT: 1000 })) {
    for (const key of Array.isArray(batch) ? batch : [batch]) {
      const pattern = key
        .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<id>')
        .replace(/\{cc[0-9a-z]+\}/g, '{<slot tag>}')
        .replace(/:\d{10,}/g, ':<window>');
      const g = groups.get(pattern) ?? { pattern, count: 0, bytes: 0, sampled: 0, ttl: null };
      g.count++;
      if (g.sampled < 200) {
        g.bytes += Number(await client.memoryUsage(key));
        g.sampled++;
        if (g.ttl === null) {
          const t = await client.pTTL(key);
          g.ttl = t < 0 ? 'none' : `${Math.round(t / 1000)} s left`;
        }
      }
      groups.set(pattern, g);
    }
  }
  return [...groups.values()].map((g) => ({ pattern: g.pattern, count: g.count, avgBytes: g.bytes / g.sampled, ttl: g.ttl })).sort((a, b) => b.count - a.count);
}

const BEGIN = '<!-- capacity:begin (generated by `node bench/capacity.mjs --write`; edits between these markers are overwritten) -->';
const END = '<!-- capacity:end -->';
function writeBlock(file, markdown) {
  const text = readFileSync(file, 'utf8');
  if (!text.includes(BEGIN) || !text.includes(END)) throw new Error(`${file} has no capacity markers`);
  writeFileSync(file, `${text.slice(0, text.indexOf(BEGIN) + BEGIN.length)}\n${markdown}\n${text.slice(text.indexOf(END))}`);
}

function render(r) {
  const L = [];
  const n0 = (x) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '–');
  const n1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : '–');
  const n2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : '–');
  const sum = (m) => [...m.values()].reduce((a, b) => a + b, 0);
  L.push(`Run of ${r.finishedAt} (${r.mode}, ${n0(r.totalSeconds)} s): \`node bench/capacity.mjs${r.mode === 'quick' ? ' --quick' : ''}\`; ${r.machine.cpus} × ${r.machine.cpuModel}, ${r.machine.memGiB} GiB, Node ${r.machine.node}; ${r.infra ?? ''}; load generator ${r.loadGenerator}.`);
  L.push('');
  if (r.counts.length) {
    L.push(`**Counts per request** (${r.counts.map((c) => `${c.id}: ${c.requests}`).join(', ')} requests, 8 concurrent; Postgres counted at the wire, Redis from INFO deltas):`);
    L.push('');
    L.push('| request kind | Redis commands | Redis bytes in / out | Postgres statements | of which | Postgres bytes to / from |');
    L.push('|---|---:|---:|---:|---|---:|');
    for (const c of r.counts) {
      const per = (x) => x / c.requests;
      const cmds = [...c.redis.commands].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${n2(per(v))}`).join(', ');
      L.push(
        `| ${c.title} | ${n2(per(sum(c.redis.commands)))} (${cmds || '–'}) | ${n0(per(c.redis.netIn))} / ${n0(per(c.redis.netOut))} | ${n2(per(c.pg.statements))} | ${[...c.pg.byKind].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${n2(per(v))}`).join(', ') || '–'} | ${n0(per(c.pg.bytesOut))} / ${n0(per(c.pg.bytesIn))} |`,
      );
    }
    L.push('');
  }
  if (r.idle) {
    const perMin = (x) => (x * 60) / r.idle.seconds;
    L.push(
      `**One idle instance** (${n0(r.idle.seconds)} s, no requests), per minute: Postgres ${n1(perMin(r.idle.pg.statements))} statements (${[...r.idle.pg.byKind].map(([k, v]) => `${k} ${n1(perMin(v))}`).join(', ') || 'none'}); Redis ${n1(perMin(sum(r.idle.redis.commands)))} commands (${[...r.idle.redis.commands].map(([k, v]) => `${k} ${n1(perMin(v))}`).join(', ') || 'none'}); service CPU ${n1((r.idle.serviceCpuS * 1000 * 60) / r.idle.seconds)} ms.`,
    );
    L.push('');
  }
  if (r.rates.length) {
    L.push(`**Rates**: ${r.settings.rounds} runs of ${r.settings.durationS} s per kind after a ${r.settings.warmupS} s warm-up, medians; CPU time per request of the service process, Redis (INFO cpu) and the database's Postgres backends (/proc); req/s per core = 10⁶ / service µs.`);
    L.push('');
    const warnRows = [];
    L.push('| request kind | driver | req/s (this shared machine) | p50 / p99 ms | service CPU µs/req | → req/s per core | Redis CPU µs/req | Postgres CPU µs/req | 503 answers | load average per run |');
    L.push('|---|---|---:|---:|---:|---:|---:|---:|---:|---|');
    for (const k of r.rates) {
      warnRows.push(...Object.entries(k.warnings ?? {}).map(([m, c]) => `${k.title}: ${c} × "${m}"`));
      L.push(`| ${k.title} | ${k.driver} | ${n0(k.rps)} | ${n2(k.p50Ms)} / ${n2(k.p99Ms)} | ${n0(k.serviceCpuUs)} | ${n0(1e6 / k.serviceCpuUs)} | ${n1(k.redisCpuUs)} | ${n0(k.pgCpuUs)} | ${k.unavailable} | ${k.loads.join(', ')} |`);
    }
    L.push('');
    if (warnRows.length) {
      L.push('Warnings the services logged during these runs (a Redis answer later than REDIS_TIMEOUT_MS on this loaded machine fails open: the request is answered, from Postgres, and not counted):');
      L.push('');
      for (const w of warnRows) L.push(`- ${w}`);
      L.push('');
    }
  }
  if (r.memory) {
    const m = r.memory;
    L.push(
      `**Memory** (${n0(m.organisations)} organisations, one key each, each key used once, then twice more after the 10 s change bound): Redis used_memory +${n0(m.redisAfter.usedMemory)} B (+${n0(m.redisAfter.usedMemory / m.organisations)} B per organisation), +${n0(m.redisAfter.keys)} keys; service RSS ${n0(m.serviceRssMiB.before)} → ${n0(m.serviceRssMiB.after)} MiB. Every key in this Redis afterwards, earlier runs' included (the counts; sizes and TTLs from up to 200 of each shape):`,
    );
    L.push('');
    L.push('| key shape | keys | bytes each (MEMORY USAGE) | TTL |');
    L.push('|---|---:|---:|---|');
    for (const k of m.keys) L.push(`| \`${k.pattern}\` | ${n0(k.count)} | ${n0(k.avgBytes)} | ${k.ttl} |`);
    L.push('');
  }
  if (r.four) {
    const f = r.four;
    L.push(
      `**Four instances** on one Postgres and one Redis, GET own organisation (cache on), one wrk per instance (${f.connectionsPerInstance} connections each), ${r.settings.rounds} runs of ${r.settings.fourDurationS} s: total ${n0(f.totalRps)} req/s (median); service CPU ${n0(f.serviceCpuUs)} µs/req; CPU in cores: services ${n2(f.serviceCpuCores)}, Redis ${n2(f.redisCpuCores)}, Postgres ${n2(f.pgCpuCores)}; warning or error log lines: ${f.warnLines.map((w, i) => `instance ${i + 1} ${Object.entries(w).map(([m, c]) => `${c} × "${m}"`).join(', ') || 'none'}`).join('; ')}; no socket error and no non-2xx answer.`,
    );
    L.push('');
    for (const run of f.runs) L.push(`- ${n0(run.totalRps)} req/s = ${run.perInstanceRps.map(n0).join(' + ')}; p99 ${run.p99Ms.map(n1).join(' / ')} ms; ${n0(run.redisCommandsPerS)} Redis commands/s; load average ${run.load}`);
  }
  return L.join('\n');
}
