/**
 * Holding connections is bounded (operations guide, section 10): at most MAX_CONNECTIONS at once,
 * below the process's descriptor limit, and at the cap a new connection closes the least recently
 * active idle one (a connection with a request in flight is never closed for it); the header
 * section must arrive within HEADERS_TIMEOUT_MS (10 s by default; a silent connection too), the
 * whole request within REQUEST_TIMEOUT_MS (30 s by default), each answered 408 and closed.
 *
 * The cap is tested on a real `serve` under `ulimit -n 1024`: before it, 1,100 idle connections
 * made the process run out of descriptors and legitimate requests failed with ECONNRESET. The
 * test's own end holds its sockets with its own, higher, limit.
 */
import { request as httpRequest, Agent, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { execFileSync } from 'node:child_process';
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../src/config.js';
import { defaultMaxConnections, parseProcLimits, softDescriptorLimit } from '../src/descriptors.js';
import { connectionsCheckingIntervalFor, listen, type RunningServer } from '../src/server.js';
import { ensureBuilt, printedKeys, startServe, tempDir, type Env, type ServeProcess } from './support/cli.js';
import { join } from 'node:path';
import { CapturingLogger } from '@cos/core/testing';

/** A raw client connection and everything the server sent on it. */
interface Raw {
  readonly socket: Socket;
  received: string;
  closed: boolean;
  /** When the server's close reached the client (Date.now()). */
  closedAt: number;
  readonly closing: Promise<void>;
}

function open(port: number, first?: string): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let closeNow: () => void = () => undefined;
    const raw: Raw = {
      socket,
      received: '',
      closed: false,
      closedAt: 0,
      closing: new Promise<void>((r) => (closeNow = r)),
    };
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (raw.received += d));
    socket.on('error', () => undefined);
    socket.once('close', () => {
      raw.closed = true;
      raw.closedAt = Date.now();
      closeNow();
    });
    socket.once('connect', () => {
      if (first !== undefined) socket.write(first);
      resolve(raw);
    });
    socket.once('error', reject);
  });
}

async function waitFor(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** One request on a fresh connection (no keep-alive): the server has to admit a new connection for each. */
function freshRequest(url: string, path: string, headers: Record<string, string> = {}): Promise<number> {
  const agent = new Agent({ keepAlive: false });
  return new Promise<number>((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  }).finally(() => agent.destroy());
}

describe('connection limits: the rules (MAX_CONNECTIONS, HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS)', () => {
  it('the documented defaults: 10 s for the header section, 30 s for the whole request, checked every second; MAX_CONNECTIONS derived when unset', () => {
    const config = loadConfig({ DATABASE_URL: 'sqlite::memory:' }, { envFile: false });
    expect(config).to.include({ headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, maxConnections: null, keyUsageFlushMs: 60_000 });
    expect(connectionsCheckingIntervalFor(10_000)).to.equal(1_000);
    expect(connectionsCheckingIntervalFor(1_000)).to.equal(250);
    expect(connectionsCheckingIntervalFor(100)).to.equal(50);
    expect(loadConfig({ DATABASE_URL: 'sqlite::memory:', MAX_CONNECTIONS: '500' }, { envFile: false }).maxConnections).to.equal(500);
  });

  it('a header timeout above the request timeout, and values out of range, are refused naming the variable', () => {
    const load = (env: Env) => loadConfig({ DATABASE_URL: 'sqlite::memory:', ...env }, { envFile: false });
    expect(() => load({ HEADERS_TIMEOUT_MS: '20000', REQUEST_TIMEOUT_MS: '10000' })).to.throw(
      /^invalid configuration: HEADERS_TIMEOUT_MS must not be greater than REQUEST_TIMEOUT_MS$/,
    );
    expect(() => load({ MAX_CONNECTIONS: '0' })).to.throw(/^invalid configuration: MAX_CONNECTIONS must be an integer from 1 to 1000000$/);
    expect(() => load({ HEADERS_TIMEOUT_MS: '0' })).to.throw(/HEADERS_TIMEOUT_MS must be an integer from 100 to 600000/);
    expect(() => load({ REQUEST_TIMEOUT_MS: '1e4' })).to.throw(/REQUEST_TIMEOUT_MS must be an integer from 100 to 3600000/);
    expect(() => load({ KEY_USAGE_FLUSH_MS: '999' })).to.throw(/KEY_USAGE_FLUSH_MS must be an integer from 1000 to 3600000/);
  });

  it('the default cap: the soft descriptor limit less a quarter of it, 32 to 256 kept for the pools, Redis and webhooks', () => {
    expect(defaultMaxConnections(1024)).to.equal(768);
    expect(defaultMaxConnections(256)).to.equal(192);
    expect(defaultMaxConnections(100)).to.equal(68);
    expect(defaultMaxConnections(4096)).to.equal(3840);
    expect(defaultMaxConnections(65_536)).to.equal(65_280);
    expect(defaultMaxConnections(Number.POSITIVE_INFINITY), 'unlimited counts as 65,536').to.equal(65_280);
    expect(defaultMaxConnections(null), 'unknown counts as 1,024').to.equal(768);
    const limits = 'Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n';
    expect(parseProcLimits(limits)).to.equal(1024);
    expect(parseProcLimits(limits.replace('1024 ', 'unlimited'))).to.equal(Number.POSITIVE_INFINITY);
    expect(parseProcLimits('Max processes 10 10 processes\n')).to.equal(null);
    // This process's own limit, as the shell reports it.
    expect(softDescriptorLimit()).to.equal(Number(execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim()));
  });
});

describe('connection cap in listen(): the least recently active idle connection goes first', function () {
  this.timeout(20_000);
  let running: RunningServer | undefined;
  const raws: Raw[] = [];
  const release: (() => void)[] = [];
  afterEach(async () => {
    for (const r of release.splice(0)) r();
    for (const r of raws.splice(0)) r.socket.destroy();
    await running?.stop(0);
    running = undefined;
  });

  /** An app that answers /hold only when released, /upload once its body has arrived, anything else at once. */
  const app = {
    callback: () => (req: IncomingMessage, res: ServerResponse) => {
      const answer = (): void => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 });
        res.end('ok');
      };
      if (req.url === '/hold') release.push(answer);
      else if (req.url === '/upload') req.resume().once('end', answer);
      else answer();
    },
  };
  const get = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;
  const tracked = async (port: number, first?: string): Promise<Raw> => {
    const r = await open(port, first);
    raws.push(r);
    return r;
  };

  it('at the cap a new connection closes the idle one active longest ago (a keep-alive connection answered just now is kept); with every connection busy the new one is refused', async () => {
    const logger = new CapturingLogger();
    running = await listen(app, '127.0.0.1', 0, logger, { maxConnections: 3 });
    const { port } = running;
    const a = await tracked(port, get('/a'));
    await waitFor('a answered', () => a.received.includes('ok'), 5_000);
    const b = await tracked(port); // silent
    await sleep(30);
    const c = await tracked(port, 'GET /slow-headers HTTP/1.1\r\nHost'); // headers not complete: idle too
    await sleep(30);
    a.socket.write(get('/a-again')); // a is the most recently active now
    await waitFor('a answered again', () => a.received.split('ok').length === 3, 5_000);
    const d = await tracked(port);
    await b.closing;
    await sleep(50);
    expect([a.closed, c.closed, d.closed]).to.deep.equal([false, false, false]);
    const e = await tracked(port);
    await c.closing;
    await sleep(50);
    expect([a.closed, d.closed, e.closed]).to.deep.equal([false, false, false]);
    expect(logger.entries.some((l) => l.level === 'warn' && /connection cap reached/.test(l.message))).to.equal(true);

    // Every connection with a request in flight: none is closed for a newcomer, which is refused.
    a.socket.write(get('/hold'));
    d.socket.write(get('/hold'));
    e.socket.write(get('/hold'));
    await waitFor('three requests in flight', () => running!.inFlight() === 3, 5_000);
    const f = await tracked(port);
    await f.closing;
    expect(f.received).to.equal('');
    for (const r of release.splice(0)) r();
    for (const r of [a, d, e]) await waitFor('held request answered', () => r.received.endsWith('ok') && r.received.split('ok').length >= 2, 5_000);
    expect([a.closed, d.closed, e.closed]).to.deep.equal([false, false, false]);
  });

  it('C-140: a request whose body has not arrived is not protected: at the cap an unauthenticated one goes in the order of the idle ones, an authenticated one after every idle one; a request that has fully arrived is never closed', async () => {
    running = await listen(app, '127.0.0.1', 0, new CapturingLogger(), { maxConnections: 4 });
    const { port } = running;
    const upload = (authorization: string): string =>
      `POST /upload HTTP/1.1\r\nHost: x\r\n${authorization}Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`;
    const closes = (what: string, raw: Raw): Promise<void> => waitFor(what, () => raw.closed, 5_000);
    const authenticated = await tracked(port, upload('Authorization: Bearer cos_anything\r\n'));
    await waitFor('the authenticated upload in flight', () => running!.inFlight() === 1, 5_000);
    const unauthenticated = await tracked(port, upload(''));
    await waitFor('the unauthenticated upload in flight', () => running!.inFlight() === 2, 5_000);
    const held = await tracked(port, get('/hold'));
    await waitFor('the held request in flight', () => running!.inFlight() === 3, 5_000);
    const silent = await tracked(port);

    // At the cap: the unauthenticated upload goes first, before the silent connection accepted after it.
    const first = await tracked(port);
    await closes('the unauthenticated upload closed', unauthenticated);
    expect(unauthenticated.received, 'closed without an answer').to.equal('');
    await sleep(50);
    expect([authenticated.closed, held.closed, silent.closed, first.closed]).to.deep.equal([false, false, false, false]);

    // Idle connections (silent, then the newcomer before) go before the authenticated upload, although accepted after it.
    const second = await tracked(port);
    await closes('the silent connection closed', silent);
    const third = await tracked(port);
    await closes('the first newcomer closed', first);
    await sleep(50);
    expect([authenticated.closed, held.closed, second.closed, third.closed]).to.deep.equal([false, false, false, false]);

    // With no idle connection left, the authenticated upload goes; the held requests, which have fully arrived, stay.
    second.socket.write(get('/hold'));
    third.socket.write(get('/hold'));
    await waitFor('three held requests and the upload in flight', () => running!.inFlight() === 4, 5_000);
    const fourth = await tracked(port);
    await closes('the authenticated upload closed', authenticated);
    expect(authenticated.received).to.equal('');
    await sleep(50);
    expect([held.closed, second.closed, third.closed, fourth.closed]).to.deep.equal([false, false, false, false]);

    // Every request has fully arrived now: the newcomer is refused.
    fourth.socket.write(get('/hold'));
    await waitFor('four held requests in flight', () => running!.inFlight() === 4, 5_000);
    const refused = await tracked(port);
    await closes('the newcomer refused', refused);
    expect(refused.received).to.equal('');
    for (const r of release.splice(0)) r();
    for (const r of [held, second, third, fourth]) await waitFor('held request answered', () => r.received.endsWith('ok'), 5_000);
    expect([held.closed, second.closed, third.closed, fourth.closed]).to.deep.equal([false, false, false, false]);
  });

  it("C-142: a connection Node's own timeout check misses (here: switched off after listen) is still answered 408 and closed: a silent one after the keep-alive and header timeouts, a stalled body after the request timeout, never earlier", async () => {
    const logger = new CapturingLogger();
    running = await listen(app, '127.0.0.1', 0, logger, { headersTimeoutMs: 200, requestTimeoutMs: 400, keepAliveTimeoutMs: 300 });
    // Node checks nothing when both of its timeouts are 0: every connection is one its check misses.
    running.server.headersTimeout = 0;
    running.server.requestTimeout = 0;
    const slack = 2 * connectionsCheckingIntervalFor(200);
    const t0 = Date.now();
    const silent = await tracked(running.port);
    const stalled = await tracked(running.port, 'POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{');
    await waitFor('the silent connection closed', () => silent.closed, 5_000);
    await waitFor('the stalled body closed', () => stalled.closed, 5_000);
    expect(silent.received).to.match(/^HTTP\/1\.1 408 /);
    expect(stalled.received).to.match(/^HTTP\/1\.1 408 /);
    expect(silent.closedAt - t0, 'silent: not before keep-alive + header timeout + slack').to.be.at.least(300 + 200 + slack);
    expect(stalled.closedAt - t0, 'stalled body: not before the request timeout + slack').to.be.at.least(400 + slack);
    const warnings = logger.entries.filter((e) => e.level === 'warn' && e.message.includes("Node's own check missed"));
    expect(warnings, 'one throttled warning').to.have.length(1);
    expect(warnings[0]?.fields['closed']).to.be.a('number').and.at.least(1);
  });
});

describe('serve: connection cap and timeouts', function () {
  this.timeout(90_000);
  let tmp: { dir: string; remove(): void };
  let env: Env;
  const servers: ServeProcess[] = [];
  const raws: Raw[] = [];

  before(async function () {
    this.timeout(180_000);
    await ensureBuilt();
  });
  beforeEach(() => {
    // A database of its own for each test: `--bootstrap` prints a platform key each time.
    tmp = tempDir();
    env = {
      DATABASE_URL: `sqlite:${join(tmp.dir, 'data', 'cos.sqlite')}`,
      PORT: '0',
      RATE_LIMIT_PER_MINUTE: '1000000',
      UNAUTH_RATE_LIMIT_PER_MINUTE: '1000000',
    };
  });
  afterEach(() => {
    for (const r of raws.splice(0)) r.socket.destroy();
    for (const s of servers.splice(0)) s.kill();
    tmp.remove();
  });

  it('under ulimit -n 1024: the default cap is 768, and while 1,100 idle and silent connections are held, 50 sequential requests on new connections all answer 2xx; a request in flight is never closed for the cap', async () => {
    // Long timeouts here: the connections below must stay until the server closes them for the cap.
    const s = startServe(['--bootstrap'], { ...env, HEADERS_TIMEOUT_MS: '60000', REQUEST_TIMEOUT_MS: '60000' }, tmp.dir, { descriptorLimit: 1024 });
    servers.push(s);
    const { url, port, line } = await s.listening();
    expect(line['max_connections'], 'the default below ulimit -n 1024').to.equal(768);
    const key = printedKeys(s.stdout())[0]!;

    // The oldest connection, with a request in flight: headers in (100 Continue answered), body not yet.
    const body = JSON.stringify({ name: 'Held', slug: 'held' });
    const held = await open(
      port,
      `POST /v1/organisations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n`,
    );
    raws.push(held);
    await waitFor('100 Continue', () => held.received.startsWith('HTTP/1.1 100 Continue'), 10_000);
    held.socket.write(body.slice(0, 5));

    // 1,100 more: half silent, half with a request line and part of a header section.
    const idle: Raw[] = [];
    for (let i = 0; i < 1_100; i += 100) {
      const batch = await Promise.all(
        Array.from({ length: 100 }, (_, j) => open(port, (i + j) % 2 === 0 ? undefined : 'GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: ')),
      );
      idle.push(...batch);
      raws.push(...batch);
    }
    const closedCount = (): number => idle.filter((r) => r.closed).length;
    // 1,101 connections against a cap of 768: the server closes the 333 idle ones active longest ago.
    await waitFor('the server to close 333 idle connections', () => closedCount() >= 333, 20_000);
    await sleep(200);
    expect(closedCount()).to.equal(333);
    expect(held.closed).to.equal(false);

    // Each request finds the server at the cap: one more idle connection first (the attacker keeps
    // the pressure up), then the request on a new connection of its own.
    const statuses: number[] = [];
    for (let i = 0; i < 50; i++) {
      const more = await open(port);
      idle.push(more);
      raws.push(more);
      statuses.push(
        i % 2 === 0 ? await freshRequest(url, '/v1/health') : await freshRequest(url, '/v1/organisations?limit=1', { authorization: `Bearer ${key}` }),
      );
    }
    expect(statuses.filter((st) => st < 200 || st > 299), `statuses: ${statuses.join(',')}`).to.deep.equal([]);
    // At least one idle connection closed per request admitted (and at most one per connection opened).
    await sleep(100);
    expect(closedCount()).to.be.within(333 + 50, 333 + 100);
    expect(held.closed).to.equal(false);

    // The request in flight from before the flood is answered.
    held.socket.write(body.slice(5));
    await waitFor('the held request answered', () => /HTTP\/1\.1 201 /.test(held.received), 10_000);
    expect(s.logLines().some((l) => l['msg'] === 'connection cap reached: idle connections closed to admit new ones (MAX_CONNECTIONS)')).to.equal(true);
  });

  it('C-140, C-141: while 70 unauthenticated GET /v1/health declaring a 100,000-byte body trickle it against MAX_CONNECTIONS=64 (reopened as they close), 20 of 20 authenticated requests on new connections are answered 2xx; each of the 70 is answered without its body and closed, or closed for the cap', async () => {
    // Timeouts far beyond the test: what closes the slow bodies here is the answer or the cap.
    const s = startServe(['--bootstrap'], { ...env, MAX_CONNECTIONS: '64', HEADERS_TIMEOUT_MS: '60000', REQUEST_TIMEOUT_MS: '60000' }, tmp.dir);
    servers.push(s);
    const { url, port } = await s.listening();
    const key = printedKeys(s.stdout())[0]!;
    const slowBody = 'GET /v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{';
    const attack: Raw[] = [];
    // Back to 70 open: every one has been accepted by the time the next legitimate connection is.
    const reopen = async (): Promise<void> => {
      const missing = 70 - attack.filter((r) => !r.closed).length;
      const batch = await Promise.all(Array.from({ length: missing }, () => open(port, slowBody)));
      attack.push(...batch);
      raws.push(...batch);
    };
    const trickle = setInterval(() => {
      for (const r of attack) if (!r.closed) r.socket.write('x');
    }, 2_000);
    const statuses: number[] = [];
    try {
      await reopen();
      for (let i = 0; i < 20; i++) {
        statuses.push(await freshRequest(url, '/v1/organisations?limit=1', { authorization: `Bearer ${key}` }));
        await reopen();
      }
      await waitFor('every slow-body connection closed by the server', () => attack.every((r) => r.closed), 20_000);
    } finally {
      clearInterval(trickle);
    }
    expect(statuses.filter((st) => st < 200 || st > 299), `statuses: ${statuses.join(',')}`).to.deep.equal([]);
    const answered = attack.filter((r) => r.received !== '');
    for (const r of answered) expect(r.received).to.match(/^HTTP\/1\.1 200 [^]*\r\nConnection: close\r\n/i);
    expect(answered.length, 'answered without waiting for the body').to.be.greaterThan(0);
    expect(attack.length).to.be.at.least(70);
  });

  it('after the cap has been reached (200 silent connections against MAX_CONNECTIONS=64, then destroyed), a silent connection is still answered 408 and closed at HEADERS_TIMEOUT_MS, also one opened later', async () => {
    const s = startServe([], { ...env, MAX_CONNECTIONS: '64', HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '2500' }, tmp.dir);
    servers.push(s);
    const { port } = await s.listening();
    /** A silent connection: when it was answered 408 and closed, after it was opened. */
    const silentFor = async (): Promise<number> => {
      const t0 = Date.now();
      const probe = await open(port);
      raws.push(probe);
      await waitFor('the silent connection closed', () => probe.closed, 6_000);
      expect(probe.received).to.match(/^HTTP\/1\.1 408 /);
      return probe.closedAt - t0;
    };
    const before = await silentFor();
    const flood: Raw[] = [];
    for (let i = 0; i < 200; i += 50) flood.push(...(await Promise.all(Array.from({ length: 50 }, () => open(port)))));
    raws.push(...flood);
    // The server closed 136 of them for the cap (exactly: the 64 kept are the last accepted).
    await waitFor('136 closed for the cap', () => flood.filter((r) => r.closed).length >= 136, 10_000);
    for (const r of flood) r.socket.destroy();
    const after = await silentFor();
    await sleep(1_200);
    const later = await silentFor();
    // Not before the timeout; after it within the check interval (250 ms) and a busy machine's slack.
    for (const [name, ms] of [['before the cap', before], ['after the cap', after], ['opened later', later]] as const) {
      expect(ms, name).to.be.within(900, 1_000 + 5_000);
    }
    expect(s.logLines().some((l) => l['msg'] === 'connection cap reached: idle connections closed to admit new ones (MAX_CONNECTIONS)')).to.equal(true);
  });

  it('a silent connection and a slow header section are answered 408 and closed after HEADERS_TIMEOUT_MS; a trickled body after REQUEST_TIMEOUT_MS, changing nothing', async () => {
    const s = startServe(['--bootstrap'], { ...env, HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '2500' }, tmp.dir);
    servers.push(s);
    const { url, port } = await s.listening();
    const key = printedKeys(s.stdout())[0]!;
    const t0 = Date.now();
    const silent = await open(port);
    const slowHeaders = await open(port, 'GET /v1/health HTTP/1.1\r\nHost: x\r\n');
    const body = JSON.stringify({ name: 'Trickled', slug: 'trickled' });
    const trickled = await open(
      port,
      `POST /v1/organisations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
    );
    raws.push(silent, slowHeaders, trickled);
    // One header byte / body byte every 100 ms, until the server closes the connection.
    let sent = 0;
    const trickle = setInterval(() => {
      if (!slowHeaders.closed) slowHeaders.socket.write('X');
      if (!trickled.closed && sent < body.length - 1) trickled.socket.write(body[sent++]!);
    }, 100);
    try {
      await Promise.all([silent.closing, slowHeaders.closing, trickled.closing].map((p) => Promise.race([p, sleep(20_000)])));
    } finally {
      clearInterval(trickle);
    }
    for (const [name, raw, timeout] of [
      ['silent', silent, 1_000],
      ['slow headers', slowHeaders, 1_000],
      ['trickled body', trickled, 2_500],
    ] as const) {
      expect(raw.closed, `${name} closed`).to.equal(true);
      expect(raw.received, name).to.match(/^HTTP\/1\.1 408 /);
      expect(raw.received, name).to.include('{"error":"VALIDATION_ERROR","message":"The request did not arrive in time","details":[]}');
      // Not before the timeout; after it within the check interval (250 ms here) and a busy machine's slack.
      expect(raw.closedAt - t0, name).to.be.within(timeout - 100, timeout + 5_000);
    }
    const listed = await fetch(`${url}/v1/organisations?limit=100`, { headers: { authorization: `Bearer ${key}` } });
    const orgs = ((await listed.json()) as { data: { slug: string }[] }).data;
    expect(orgs.map((o) => o.slug)).to.not.include('trickled');
  });
});

