/**
 * The operations listener of `cos-admin serve`, through a real serve process:
 * OPS_PORT unset is off; set, it answers GET /livez (touches no dependency), /readyz (the store
 * within its budget; 503 while the store is unreachable and while draining after SIGTERM) and
 * /metrics (Prometheus text: the named cos_* metrics with their labels, route templates, no key
 * material), never on the public port (404 in the contract's shape there, C-9), and its probes keep
 * answering 200 while the API port answers 429 to everyone (C-50's global unauthenticated counter
 * exhausted). OPS_PORT / OPS_HOST are validated like every other variable.
 */
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import { cliJson, ensureBuilt, printedKeys, runCli, type ServeProcess } from './support/cli.js';
import { databaseTargets, suiteDatabase } from './support/databases.js';
import { sample } from './support/prometheus.js';

before(async function () {
  this.timeout(180_000);
  await ensureBuilt();
});

interface Answer {
  readonly status: number;
  readonly text: string;
  readonly headers: Headers;
}

async function get(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(url, { headers });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** GETs `url` until it answers `status` or `ms` have passed; the last answer. */
async function poll(url: string, status: number, ms: number): Promise<Answer> {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await get(url);
    if (r.status === status || Date.now() > deadline) return r;
    await sleep(20);
  }
}

/** The ops listener's address from the start-up line (`ops`: its URL, or "off"). */
async function started(s: ServeProcess): Promise<{ api: string; ops: string }> {
  const { url, line } = await s.listening();
  return { api: url, ops: String(line['ops']) };
}

/** A TCP proxy the test owns in front of Postgres: cut() resets every connection and refuses new ones. */
class Proxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private up = true;

  async start(targetHost: string, targetPort: number): Promise<number> {
    const server = createServer((client) => {
      if (!this.up) return void client.destroy();
      const upstream = connect(targetPort, targetHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          this.sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as { port: number }).port;
  }

  cut(): void {
    this.up = false;
    for (const s of this.sockets) s.destroy();
  }

  restore(): void {
    this.up = true;
  }

  close(): void {
    this.cut();
    this.server?.close();
  }
}

const NOT_FOUND = { error: 'NOT_FOUND', message: 'No such resource path', details: [] };

/** C-9: the ops routes are unknown paths on the public port, answered in the contract's shape. */
async function expectNotOnPublicPort(api: string): Promise<void> {
  for (const path of ['/livez', '/readyz', '/metrics']) {
    const r = await get(`${api}${path}`);
    expect(r.status, path).to.equal(404);
    expect(JSON.parse(r.text)).to.deep.equal(NOT_FOUND);
  }
}

async function stopCleanly(s: ServeProcess): Promise<void> {
  s.child.kill('SIGTERM');
  expect((await s.exited()).code).to.equal(0);
}

for (const target of databaseTargets()) {
  describe(`cos-admin serve: the operations listener on ${target.name} (Operator interface)`, function () {
    this.timeout(90_000);
    const suite = suiteDatabase(target, { PORT: '0', RATE_LIMIT_PER_MINUTE: '1000000', UNAUTH_RATE_LIMIT_PER_MINUTE: '1000000' });
    const { serve } = suite;
    let platformKey: string;

    before(async () => {
      expect((await suite.json('migrate')).applied).to.include('0001_initial');
      const boot = await suite.cli('bootstrap');
      platformKey = printedKeys(boot.stdout)[0]!;
      expect(platformKey, boot.stderr).to.be.a('string');
    });

    it('OPS_PORT unset: no operations listener (start-up line says ops "off"); /livez, /readyz, /metrics on the API port are 404 in the contract shape (C-9)', async () => {
      const s = serve([]);
      const { api, ops } = await started(s);
      expect(ops).to.equal('off');
      await expectNotOnPublicPort(api);
      await stopCleanly(s);
    });

    it('OPS_PORT set: livez and readyz answer 200 without a key, bound to OPS_HOST; never on the public port (404 in the contract shape there)', async () => {
      const s = serve([], { OPS_PORT: '0', OPS_HOST: '127.0.0.1' });
      const { api, ops } = await started(s);
      expect(ops).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(ops).not.to.equal(api);
      for (const path of ['/livez', '/readyz']) {
        const r = await get(`${ops}${path}`);
        expect(r.status, path).to.equal(200);
        expect(r.text).to.equal('ok\n');
        expect(r.headers.get('cache-control')).to.equal('no-store');
        expect(r.headers.get('x-ratelimit-limit'), 'no rate limit on the ops listener').to.equal(null);
      }
      expect((await get(`${ops}/metrics`)).status).to.equal(200);
      expect((await get(`${ops}/v1/health`)).status, 'the API is not on the ops listener').to.equal(404);
      expect((await fetch(`${ops}/livez`, { method: 'POST' })).status).to.equal(405);
      await expectNotOnPublicPort(api);
      await stopCleanly(s);
    });

    it('/metrics: the named metrics with their labels after some traffic, route templates instead of raw paths, no key material (C-31)', async () => {
      // The test's webhook receiver is plain http on loopback: both opt-ins, for `serve` and `org webhook set`.
      const local = { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE: 'true' };
      const s = serve([], { OPS_PORT: '0', WEBHOOK_POLL_INTERVAL_MS: '50', ...local });
      const { api, ops } = await started(s);
      const auth = { authorization: `Bearer ${platformKey}` };
      const orgs = JSON.parse((await get(`${api}/v1/organisations`, auth)).text) as { data: { id: string }[] };
      const orgId = orgs.data[0]!.id;
      expect((await get(`${api}/v1/organisations/${orgId}`, auth)).status).to.equal(200);
      expect((await get(`${api}/v1/organisations/${orgId}`)).status).to.equal(401); // missing
      expect((await get(`${api}/v1/organisations/${orgId}`, { authorization: `Token ${platformKey}` })).status).to.equal(401); // malformed
      const unknownKey = `svc_live_${'Z'.repeat(48)}`;
      expect((await get(`${api}/v1/organisations/${orgId}`, { authorization: `Bearer ${unknownKey}` })).status).to.equal(401); // unknown_key
      expect((await get(`${api}/v1/${platformKey}`)).status).to.equal(404); // a key pasted into a path
      expect((await get(`${api}/v1/health`)).status).to.equal(200);

      const r = await get(`${ops}/metrics`);
      expect(r.status).to.equal(200);
      expect(r.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
      const text = r.text;
      // default process metrics
      for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
        expect(sample(text, name), name).to.be.a('number');
      }
      expect(sample(text, 'cos_http_requests_total', { method: 'GET', route: '/v1/organisations/:org_id', status: '200' })).to.equal(1);
      expect(sample(text, 'cos_http_requests_total', { method: 'GET', route: '/v1/organisations/:org_id', status: '401' })).to.equal(3);
      expect(sample(text, 'cos_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' })).to.equal(1);
      expect(sample(text, 'cos_http_requests_total', { method: 'GET', route: '/v1/health', status: '200' })).to.equal(1);
      expect(sample(text, 'cos_http_request_duration_seconds_count', { method: 'GET', route: '/v1/organisations/:org_id' })).to.equal(4);
      expect(sample(text, 'cos_http_request_duration_seconds_bucket', { method: 'GET', route: '/v1/organisations/:org_id', le: '+Inf' })).to.equal(4);
      expect(sample(text, 'cos_rate_limit_decisions_total', { scope: 'organisation', decision: 'allowed' })).to.equal(2);
      expect(sample(text, 'cos_rate_limit_decisions_total', { scope: 'unauthenticated', decision: 'allowed' })).to.equal(1);
      expect(sample(text, 'cos_rate_limit_decisions_total', { scope: 'source', decision: 'allowed' })).to.equal(3);
      expect(sample(text, 'cos_rate_limit_decisions_total', { scope: 'organisation', decision: 'limited' })).to.equal(0);
      expect(sample(text, 'cos_rate_counter_fail_open_total')).to.equal(0);
      expect(sample(text, 'cos_store_errors_total')).to.equal(0);
      expect(sample(text, 'cos_auth_failures_total', { reason: 'missing' })).to.equal(1);
      expect(sample(text, 'cos_auth_failures_total', { reason: 'malformed' })).to.equal(1);
      expect(sample(text, 'cos_auth_failures_total', { reason: 'unknown_key' })).to.equal(1);
      expect(sample(text, 'cos_auth_failures_total', { reason: 'revoked' })).to.equal(0);
      expect(sample(text, 'cos_auth_failures_total', { reason: 'expired' })).to.equal(0);
      for (const result of ['delivered', 'retry', 'failed']) expect(sample(text, 'cos_webhook_deliveries_total', { result }), result).to.equal(0);
      expect(sample(text, 'cos_webhook_outbox_pending')).to.be.a('number').at.least(0);
      // Route templates only: no raw id, no key, no key prefix, no digest-like hex anywhere.
      expect(text).not.to.include(orgId);
      for (const secret of [platformKey, unknownKey]) {
        expect(text).not.to.include(secret);
        expect(text).not.to.include(secret.slice(0, 12));
      }
      expect(text).not.to.match(/svc_(live|test)_/);
      expect(text).not.to.match(/[0-9a-f]{64}/);

      // C-59: a key issued through the API is a webhook notification; its delivery is counted.
      const received: string[] = [];
      const receiver = createHttpServer((req, res) => {
        req.resume().on('end', () => {
          received.push(req.url ?? '');
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      try {
        const hook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks/cos`;
        await cliJson(['org', 'webhook', 'set', orgId, '--url', hook], { ...suite.env, ...local }, suite.db.cwd);
        const issued = await fetch(`${api}/v1/organisations/${orgId}/api-keys`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ label: 'metrics' }),
        });
        expect(issued.status).to.equal(201);
        const newKey = ((await issued.json()) as { key: string }).key;
        for (let i = 0; i < 100 && received.length === 0; i++) await sleep(50);
        expect(received).to.deep.equal(['/hooks/cos']);
        let after = '';
        for (let i = 0; i < 50; i++) {
          after = (await get(`${ops}/metrics`)).text;
          if (sample(after, 'cos_webhook_deliveries_total', { result: 'delivered' }) === 1) break;
          await sleep(50);
        }
        expect(sample(after, 'cos_webhook_deliveries_total', { result: 'delivered' })).to.equal(1);
        expect(sample(after, 'cos_webhook_outbox_pending')).to.equal(0);
        expect(sample(after, 'cos_http_requests_total', { method: 'POST', route: '/v1/organisations/:org_id/api-keys', status: '201' })).to.equal(1);
        expect(after).not.to.include(newKey);
        expect(after).not.to.include(newKey.slice(0, 12));
      } finally {
        receiver.close();
      }
      await stopCleanly(s);
    });

    it('C-50: probes keep answering 200 while the API port answers 429 to everyone (the global unauthenticated counter exhausted); probes count nothing', async () => {
      const s = serve([], { OPS_PORT: '0', UNAUTH_RATE_LIMIT_PER_MINUTE: '3' });
      const { api, ops } = await started(s);
      let health = 0;
      let limited = 0;
      // Until the counter is exhausted (at most two windows' worth, should a minute end in between).
      while (limited === 0 && health < 10) {
        health += 1;
        if ((await get(`${api}/v1/health`)).status === 429) limited += 1;
      }
      expect(limited, 'the API answers 429').to.equal(1);
      const probes = await Promise.all(Array.from({ length: 20 }, (_, i) => get(`${ops}${i % 2 === 0 ? '/livez' : '/readyz'}`)));
      expect(probes.map((p) => p.status)).to.deep.equal(Array.from({ length: 20 }, () => 200));
      for (let i = 0; i < 5; i++) {
        health += 1;
        if ((await get(`${api}/v1/version`)).status === 429) limited += 1;
      }
      expect(limited, 'the storm goes on after the probes').to.be.at.least(2);
      const text = (await get(`${ops}/metrics`)).text;
      const allowed = sample(text, 'cos_rate_limit_decisions_total', { scope: 'unauthenticated', decision: 'allowed' })!;
      const refused = sample(text, 'cos_rate_limit_decisions_total', { scope: 'unauthenticated', decision: 'limited' })!;
      expect(allowed + refused, 'decisions: the API requests only, no probe').to.equal(health);
      expect(refused).to.equal(limited);
      expect(sample(text, 'cos_http_requests_total', { method: 'GET', route: '/v1/health', status: '429' })).to.be.at.least(1);
      await stopCleanly(s);
    });

    it('SIGTERM: readyz answers 503 while in-flight requests drain, livez stays 200; the process then exits 0', async () => {
      const s = serve([], { OPS_PORT: '0' });
      const { api, ops } = await started(s);
      // A request in flight on the API port: an admitted POST whose body (10 bytes announced) never
      // completes (a GET is answered without the body it does not take, C-141).
      const { port } = new URL(api);
      const socket = connect(Number(port), '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      socket.write(
        `POST /v1/organisations HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${platformKey}\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{"`,
      );
      socket.on('error', () => undefined);
      await sleep(200);
      expect((await get(`${ops}/readyz`)).status).to.equal(200);
      s.child.kill('SIGTERM');
      const ready = await poll(`${ops}/readyz`, 503, 1_000);
      expect(ready.status).to.equal(503);
      expect(ready.text).to.equal('draining\n');
      expect((await get(`${ops}/livez`)).status).to.equal(200);
      await sleep(300);
      expect((await get(`${ops}/readyz`)).status, 'still draining').to.equal(503);
      expect(s.child.exitCode, 'still running').to.equal(null);
      socket.destroy();
      expect((await s.exited()).code).to.equal(0);
    });

    it('a bad OPS_PORT or OPS_HOST stops the start with one line naming the variable; a taken OPS_PORT names OPS_PORT too', async () => {
      for (const [extra, pattern] of [
        [{ OPS_PORT: 'abc' }, /^cos-admin: .*OPS_PORT must be an integer from 0 to 65535/],
        [{ OPS_PORT: '65536' }, /^cos-admin: .*OPS_PORT must be an integer from 0 to 65535/],
        [{ OPS_PORT: '0', OPS_HOST: 'not a host' }, /^cos-admin: .*OPS_HOST must be a host name or an IP address/],
      ] as const) {
        // The configuration is read and refused before anything starts: in process.
        const r = await runCli(['serve'], { ...suite.env, ...extra }, suite.db.cwd);
        expect(r.code, JSON.stringify(extra)).to.equal(1);
        expect(r.stdout).to.equal('');
        expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1);
        expect(r.stderr.trim()).to.match(pattern);
      }
      const taken = createServer();
      await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
      try {
        const port = (taken.address() as { port: number }).port;
        const s = serve([], { OPS_PORT: String(port) });
        const exit = await s.exited();
        expect(exit.code).to.equal(1);
        expect(s.stderr().trim()).to.equal(`cos-admin: cannot listen on 127.0.0.1:${port} (OPS_HOST, OPS_PORT): the address is already in use`);
      } finally {
        taken.close();
      }
    });

    if (target.name === 'Postgres') {
      it('C-4: readyz is 503 while the store is unreachable (livez stays 200, store errors are counted) and 200 again once it is back', async () => {
        const proxy = new Proxy();
        const real = new URL(suite.db.databaseUrl);
        const proxyPort = await proxy.start(real.hostname, Number(real.port || 5432));
        const viaProxy = new URL(suite.db.databaseUrl);
        viaProxy.hostname = '127.0.0.1';
        viaProxy.port = String(proxyPort);
        try {
          const s = serve([], { OPS_PORT: '0', DATABASE_URL: viaProxy.toString() });
          const { api, ops } = await started(s);
          expect((await get(`${ops}/readyz`)).status).to.equal(200);
          proxy.cut();
          const t0 = Date.now();
          const down = await get(`${ops}/readyz`);
          expect(down.status).to.equal(503);
          expect(down.text).to.equal('store unavailable\n');
          expect(Date.now() - t0, 'within the probe budget (1 s) plus slack').to.be.below(1_800);
          expect((await get(`${ops}/livez`)).status).to.equal(200);
          expect((await get(`${api}/v1/organisations`, { authorization: `Bearer ${platformKey}` })).status).to.equal(503);
          const text = (await get(`${ops}/metrics`)).text;
          expect(sample(text, 'cos_store_errors_total')).to.be.at.least(1);
          expect(sample(text, 'cos_http_requests_total', { method: 'GET', route: '/v1/organisations', status: '503' })).to.equal(1);
          proxy.restore();
          expect((await poll(`${ops}/readyz`, 200, 5_000)).status).to.equal(200);
          await stopCleanly(s);
        } finally {
          proxy.close();
        }
      });
    }
  });
}
