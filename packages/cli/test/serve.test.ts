/**
 * `cos-admin serve` as a child process on SQLite and Postgres: migrations on start, the start-up
 * line, bootstrap, and graceful shutdown (SIGTERM while 100 requests, half of them writes, are in
 * flight: every acknowledged write is present after a restart, none half-applied, exit code 0).
 */
import { Agent, request as httpRequest } from 'node:http';
import { connect, createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn } from 'node:child_process';
import { childEnv, cliJson, ensureBuilt, jsonLines, nodeArgs, printedKeys, ROOT, startServe, type ServeProcess } from './support/cli.js';
import { databaseTargets, suiteDatabase, type TestDatabase } from './support/databases.js';

const VERSION = (JSON.parse(readFileSync(`${ROOT}/packages/cli/package.json`, 'utf8')) as { version: string }).version;

before(async function () {
  this.timeout(180_000);
  await ensureBuilt();
});

/** One request over `agent` (node:http, so the test controls its connections). */
function request(
  agent: Agent,
  base: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = httpRequest(
      `${base}${path}`,
      { method, agent, headers: { ...headers, ...(payload !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text === '' ? null : JSON.parse(text) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function listAll(base: string, key: string): Promise<any[]> {
  const out: any[] = [];
  let cursor: string | null = null;
  do {
    const res: Response = await fetch(`${base}/v1/organisations?limit=100${cursor ? `&cursor=${cursor}` : ''}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(res.status).to.equal(200);
    const body = (await res.json()) as { data: any[]; meta: { next_cursor: string | null } };
    out.push(...body.data);
    cursor = body.meta.next_cursor;
  } while (cursor !== null);
  return out;
}

for (const target of databaseTargets()) {
  describe(`cos-admin serve on ${target.name} (Operator interface)`, function () {
    this.timeout(90_000);
    const suite = suiteDatabase(target, { PORT: '0', RATE_LIMIT_PER_MINUTE: '1000000', UNAUTH_RATE_LIMIT_PER_MINUTE: '1000000' });
    const { serve } = suite;
    let platformKey: string;

    if (target.name === 'Postgres') {
      it('refuses to start with pending migrations and says to run `cos-admin migrate`', async () => {
        const s = serve(['--bootstrap']);
        const exit = await s.exited();
        expect(exit.code).to.equal(1);
        expect(s.stdout()).to.equal('');
        expect(s.stderr().trim().split('\n')).to.have.length(1);
        expect(s.stderr()).to.match(/pending migration.*run `cos-admin migrate` first/);
        expect((await suite.json('migrate')).applied).to.include('0001_initial');
      });
    }

    it(`--bootstrap prints the platform key once, then one start-up line: address, store, limiter, version`, async () => {
      const s = serve(['--bootstrap']);
      const { url, line } = await s.listening();
      expect(line).to.include({ store: target.name === 'SQLite' ? 'sqlite' : 'postgres', limiter: 'in-process', version: VERSION });
      expect(line['address']).to.equal(url);
      expect(s.logLines().filter((l) => l['address'] !== undefined)).to.have.length(1);
      if (target.name === 'SQLite') {
        expect(s.logLines().some((l) => l['msg'] === 'applied pending migrations')).to.equal(true);
      }
      const keys = printedKeys(s.stdout());
      expect(keys).to.have.length(1);
      platformKey = keys[0] as string;
      expect(s.stdout()).to.match(/Store this key now/);
      const version = await fetch(`${url}/v1/version`);
      expect(await version.json()).to.deep.equal({ api_version: 'v1', release: 'v1-stable', released_on: '2026-06-10', service_version: VERSION });
      const orgs = await listAll(url, platformKey);
      expect(orgs.map((o) => o.slug)).to.deep.equal(['platform']);
      s.child.kill('SIGINT');
      expect((await s.exited()).code).to.equal(0);
    });

    it('--bootstrap when a system organisation exists prints no key', async () => {
      const s = serve(['--bootstrap']);
      await s.listening();
      expect(printedKeys(s.stdout())).to.deep.equal([]);
      expect(s.logLines().some((l) => l['msg'] === 'a system organisation exists: bootstrap skipped')).to.equal(true);
      s.child.kill('SIGTERM');
      expect(await s.exited(), s.stdout() + s.stderr()).to.deep.equal({ code: 0, signal: null });
    });

    it('SIGTERM with 100 requests in flight (half writes): exit 0, every acknowledged write present after restart, none half-applied', async () => {
      const s = serve([]);
      const { url } = await s.listening();
      // 100 keep-alive connections, accepted by the server before the requests start, so that
      // every request below is really in flight at the server when SIGTERM arrives.
      const agent = new Agent({ keepAlive: true, maxSockets: 100 });
      try {
        const warm = await Promise.all(Array.from({ length: 100 }, () => request(agent, url, 'GET', '/v1/health')));
        expect(warm.every((r) => r.status === 200)).to.equal(true);
        const auth = { authorization: `Bearer ${platformKey}` };
        let killedAt = 0;
        const answeredAfterKill: number[] = [];
        const requests = Array.from({ length: 100 }, async (_, i) => {
          const write = i % 2 === 0;
          try {
            const res = write
              ? await request(agent, url, 'POST', '/v1/organisations', auth, { name: `Drain ${i}`, slug: `drain-${i}` })
              : await request(agent, url, 'GET', '/v1/organisations?limit=10', auth);
            if (killedAt > 0) answeredAfterKill.push(i);
            return { i, write, status: res.status, body: res.body as any };
          } catch (e) {
            return { i, write, status: 0, error: e as Error };
          } finally {
            if (killedAt === 0) {
              killedAt = Date.now();
              s.child.kill('SIGTERM');
            }
          }
        });
        const results = await Promise.all(requests);
        const exit = await s.exited();
        expect(exit, s.stdout()).to.deep.equal({ code: 0, signal: null });
        const failures = results.filter((r) => r.status === 0).map((r) => `${r.i}: ${String(r.error)}`);
        expect(failures, 'requests on connections accepted before SIGTERM are all answered').to.deep.equal([]);
        expect(answeredAfterKill.length, 'requests answered after SIGTERM').to.be.greaterThan(0);
        for (const r of results) expect([200, 201], JSON.stringify(r.body)).to.include(r.status);
        const logs = s.logLines();
        expect(logs.some((l) => l['signal'] === 'SIGTERM')).to.equal(true);
        expect(logs.find((l) => l['msg'] === 'shut down: pools closed')).to.include({ forced: false });
        if (process.env['COS_TEST_VERBOSE']) console.log(`answered after SIGTERM: ${answeredAfterKill.length} of 100`);

        const acknowledged = results.filter((r) => r.write && r.status === 201).map((r) => `drain-${r.i}`);
        expect(acknowledged).to.have.length(50);

        const again = serve([]);
        const restarted = await again.listening();
        const present = (await listAll(restarted.url, platformKey)).filter((o) => o.slug.startsWith('drain-'));
        expect(present.map((o) => o.slug as string)).to.have.members(acknowledged);
        for (const o of present) expect(o.name).to.equal(`Drain ${o.slug.slice('drain-'.length)}`);
        // none half-applied: each organisation has exactly its one organisation_created entry
        const created: any[] = [];
        let cursor: string | undefined;
        do {
          const page: any = await cliJson(
            ['audit', 'list', '--kind', 'organisation_created', '--limit', '100', ...(cursor ? ['--cursor', cursor] : [])],
            suite.env,
            suite.db.cwd,
          );
          created.push(...page.data);
          cursor = page.meta.next_cursor ?? undefined;
        } while (cursor !== undefined);
        for (const o of present) expect(created.filter((e) => e.organisation_id === o.id), o.slug).to.have.length(1);
        again.child.kill('SIGTERM');
        expect((await again.exited()).code).to.equal(0);
      } finally {
        agent.destroy();
      }
    });

    if (target.name === 'SQLite') {
      it('a request still running 10 s after SIGTERM is cut off, then pools close and the exit code is 0', async function () {
        this.timeout(40_000);
        const s = serve([]);
        const { port } = await s.listening();
        // a write whose body never finishes arriving: the request stays in flight
        const socket = connect(port, '127.0.0.1');
        await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
        socket.write(
          `POST /v1/organisations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${platformKey}\r\n` +
            'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":',
        );
        const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
        socket.on('error', () => undefined);
        const before = (await suite.json('org', 'list')).data.length;
        const t0 = Date.now();
        s.child.kill('SIGTERM');
        const exit = await s.exited();
        const elapsed = Date.now() - t0;
        await closed;
        expect(exit).to.deep.equal({ code: 0, signal: null });
        expect(elapsed).to.be.within(9_500, 20_000);
        const logs = s.logLines();
        expect(logs.some((l) => l['msg'] === 'shutdown grace period over: closing the remaining connections')).to.equal(true);
        expect(logs.find((l) => l['msg'] === 'shut down: pools closed')).to.include({ forced: true });
        // the cut-off write wrote nothing
        expect((await suite.json('org', 'list')).data).to.have.length(before);
      });
    }

    it('a port already in use is one line on stderr and exit 1', async () => {
      const blocker = createServer();
      await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
      const port = (blocker.address() as { port: number }).port;
      try {
        const s = serve([], { PORT: String(port) });
        const exit = await s.exited();
        expect(exit.code).to.equal(1);
        const lines = s.stderr().trim().split('\n');
        expect(lines).to.have.length(1);
        expect(lines[0]).to.match(new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: the address is already in use`));
      } finally {
        blocker.close();
      }
      const bad = await suite.cli('serve', '--port', '99999');
      expect(bad.code, 'a malformed option value is a usage error').to.equal(2);
      expect(bad.stderr.trim()).to.equal('cos-admin: --port must be an integer from 0 to 65535');
    });
  });
}

describe('cos-admin serve with REDIS_URL (C-55)', function () {
  this.timeout(60_000);
  const redisUrl = process.env['TEST_REDIS_URL'];
  const servers: ServeProcess[] = [];
  let tmp: TestDatabase | undefined;
  afterEach(async () => {
    for (const s of servers.splice(0)) s.kill();
    await tmp?.drop();
  });

  it('C-55: with REDIS_URL set the limiter is Redis and two instances share one counter per organisation', async function () {
    if (redisUrl === undefined || redisUrl === '') {
      if (process.env['CI'] === 'true') throw new Error('CI=true but TEST_REDIS_URL is not set: the Redis suites must run in CI');
      this.skip();
    }
    tmp = await databaseTargets()[0]!.create();
    const env = { DATABASE_URL: tmp.databaseUrl, PORT: '0', REDIS_URL: redisUrl as string };
    const a = startServe(['--bootstrap'], env, tmp.cwd);
    servers.push(a);
    const first = await a.listening();
    expect(first.line).to.include({ limiter: 'redis', store: 'sqlite' });
    const key = printedKeys(a.stdout())[0] as string;
    const b = startServe([], env, tmp.cwd);
    servers.push(b);
    const second = await b.listening();
    const get = async (url: string) => {
      const res = await fetch(`${url}/v1/organisations`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).to.equal(200);
      return { remaining: Number(res.headers.get('x-ratelimit-remaining')), reset: res.headers.get('x-ratelimit-reset') };
    };
    // a fresh organisation: its counter starts at 0; requests alternate between the instances
    let seen = await get(first.url);
    for (const url of [second.url, first.url, second.url]) {
      const next = await get(url);
      if (next.reset === seen.reset) expect(next.remaining).to.equal(seen.remaining - 1);
      seen = next;
    }
    for (const s of [a, b]) {
      s.child.kill('SIGTERM');
      expect((await s.exited()).code).to.equal(0);
    }
  });
});

describe('cos-admin serve: SIGTERM ends the process whatever stdout does (Operator interface: SIGTERM stops, exit 0)', function () {
  this.timeout(60_000);
  const servers: ServeProcess[] = [];
  let tmp: TestDatabase | undefined;
  before(async () => {
    tmp = await databaseTargets()[0]!.create();
  });
  afterEach(() => {
    for (const s of servers.splice(0)) s.kill();
  });
  after(async () => {
    await tmp?.drop();
  });
  const start = async (): Promise<{ s: ServeProcess; url: string }> => {
    const s = startServe([], { DATABASE_URL: tmp!.databaseUrl, PORT: '0', RATE_LIMIT_PER_MINUTE: '1000000', UNAUTH_RATE_LIMIT_PER_MINUTE: '1000000' }, tmp!.cwd);
    servers.push(s);
    const { url } = await s.listening();
    return { s, url };
  };
  /** SIGTERM, then how long the process took to exit and how. */
  const terminate = async (s: ServeProcess): Promise<{ ms: number; code: number | null; signal: NodeJS.Signals | null }> => {
    const t0 = performance.now();
    s.child.kill('SIGTERM');
    const exit = await Promise.race([s.exited(), new Promise<{ code: null; signal: null }>((resolve) => setTimeout(() => resolve({ code: null, signal: null }), 15_000))]);
    return { ms: performance.now() - t0, ...exit };
  };

  it('the reader of stdout is gone (EPIPE): exit 0 within 3 s of SIGTERM, also when the shutdown line is the first write into the broken pipe', async () => {
    // `serve | cat`, then the cat is killed: nothing is written until SIGTERM's own log line.
    const first = await start();
    first.s.child.stdout!.destroy();
    await sleep(100);
    const quiet = await terminate(first.s);
    expect(quiet, 'still running 15 s after SIGTERM').to.include({ code: 0, signal: null });
    expect(quiet.ms).to.be.below(3_000);
    // Lines written into the broken pipe while serving: the write error ends logging, not serving.
    const { s, url } = await start();
    s.child.stdout!.destroy();
    for (let i = 0; i < 20; i += 1) expect((await fetch(`${url}/v1/health`)).status).to.equal(200);
    const exit = await terminate(s);
    expect(exit, 'still running 15 s after SIGTERM').to.include({ code: 0, signal: null });
    expect(exit.ms).to.be.below(3_000);
  });

  it('`cos-admin serve | head -2` in a real shell: head exits after two lines, serving goes on, SIGTERM then exits 0 within 3 s', async () => {
    // A free port chosen here: head prints nothing before its second line (its stdout is a pipe, so
    // it is buffered), so the start-up line cannot tell the port.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', () => resolve()));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const env = childEnv({ DATABASE_URL: tmp!.databaseUrl, PORT: String(port), RATE_LIMIT_PER_MINUTE: '1000000', UNAUTH_RATE_LIMIT_PER_MINUTE: '1000000' });
    const serveCommand = [process.execPath, ...nodeArgs(['serve'])].map((a) => `'${a}'`).join(' ');
    // `> >(head -2)`: a pipe into head, with serve's own pid in $! for the signal and its exit status.
    const script = `${serveCommand} > >(head -2) & pid=$!; echo "pid $pid" >&2; wait $pid; echo "status $?" >&2`;
    const shell = spawn('bash', ['-c', script], { cwd: tmp!.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    shell.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    shell.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    const shellExited = new Promise<void>((resolve) => shell.once('exit', () => resolve()));
    let pid: number | undefined;
    try {
      const until = async (what: () => boolean, ms: number, label: string): Promise<void> => {
        const deadline = Date.now() + ms;
        while (!what()) {
          if (Date.now() > deadline) throw new Error(`${label}; stdout: ${out}; stderr: ${err}`);
          await sleep(50);
        }
      };
      await until(() => /pid \d+/.test(err), 5_000, 'bash did not start serve');
      pid = Number(/pid (\d+)/.exec(err)![1]);
      const health = async (): Promise<number> => (await fetch(`http://127.0.0.1:${port}/v1/health`)).status;
      const listening = async (): Promise<boolean> => health().then((status) => status === 200, () => false);
      const deadline = Date.now() + 30_000;
      while (!(await listening())) {
        if (Date.now() > deadline) throw new Error(`serve did not start; stderr: ${err}`);
        await sleep(100);
      }
      // The start-up line and a request's line fill head's two lines; once head has gone, every
      // request's log line meets a closed pipe (EPIPE): serving goes on.
      await until(() => out.split('\n').filter((l) => l !== '').length === 2, 5_000, 'head did not print two lines');
      expect(jsonLines(out).some((l) => l['port'] === port), 'the start-up line went through head').to.equal(true);
      await sleep(200);
      for (let i = 0; i < 20; i += 1) expect(await health()).to.equal(200);
      const t0 = performance.now();
      process.kill(pid, 'SIGTERM');
      await until(() => /status \d+/.test(err), 10_000, 'serve still running 10 s after SIGTERM');
      expect(performance.now() - t0).to.be.below(3_000);
      expect(/status (\d+)/.exec(err)![1], 'the exit status of serve').to.equal('0');
      expect(out.split('\n').filter((l) => l !== ''), 'head printed exactly two lines').to.have.length(2);
    } finally {
      if (pid !== undefined) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // exited already
        }
      }
      shell.kill('SIGKILL');
      await shellExited;
    }
  });

  it('a second signal cuts the drain short, also with a closed stdout: exit 0 within 3 s although a request is still in flight', async () => {
    const boot = await cliJson<{ key: { key: string } }>(['bootstrap', '--slug', 'signals'], { DATABASE_URL: tmp!.databaseUrl }, tmp!.cwd).catch(() => null);
    const { s, url } = await start();
    let key = boot?.key.key;
    if (key === undefined) {
      // A system organisation existed already: issue a platform key for it.
      const orgs = await cliJson<{ data: { id: string; is_system: boolean }[] }>(['org', 'list', '--all'], { DATABASE_URL: tmp!.databaseUrl }, tmp!.cwd);
      const system = orgs.data.find((o) => o.is_system)!;
      key = (await cliJson<{ key: string }>(['key', 'issue', system.id, '--label', 'signals'], { DATABASE_URL: tmp!.databaseUrl }, tmp!.cwd)).key;
    }
    s.child.stdout!.destroy();
    const port = Number(new URL(url).port);
    // a write whose body never finishes arriving: without a second signal it would hold the drain for 10 s
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.on('error', () => undefined);
    socket.write(
      `POST /v1/organisations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":',
    );
    await sleep(300);
    const t0 = performance.now();
    s.child.kill('SIGTERM');
    await sleep(300);
    expect(s.child.exitCode, 'still draining after the first signal').to.equal(null);
    s.child.kill('SIGINT');
    const exit = await Promise.race([s.exited(), sleep(15_000).then(() => ({ code: null, signal: null }))]);
    expect(exit).to.deep.equal({ code: 0, signal: null });
    expect(performance.now() - t0).to.be.below(3_000);
    socket.destroy();
  });

  it('the reader of stdout stalls (pipe full, a flush that never completes): exit within 3 s of SIGTERM', async () => {
    const { s, url } = await start();
    s.child.stdout!.pause();
    // Far more log than a pipe buffers (64 KiB): the server's writes to stdout stop completing.
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    try {
      for (let round = 0; round < 40; round += 1) {
        const answers = await Promise.all(Array.from({ length: 50 }, () => request(agent, url, 'GET', '/v1/health')));
        expect(answers.every((a) => a.status === 200)).to.equal(true);
      }
    } finally {
      agent.destroy();
    }
    const exit = await terminate(s);
    s.child.stdout!.resume();
    expect(exit.code, 'still running 15 s after SIGTERM').to.not.equal(null);
    expect(exit.ms).to.be.below(3_000);
  });
});
