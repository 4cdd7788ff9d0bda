/**
 * Webhook delivery per endpoint and at shutdown (C-59), end to end through real `cos-admin serve`
 * processes on SQLite (one file) and Postgres (one database), with real HTTP receivers on 127.0.0.1:
 *  - two instances: an endpoint that never answers, with 100 notifications queued for it, holds one
 *    attempt in flight (across both instances) and another organisation's event arrives within 2 s;
 *  - two instances, 20 signed secret-scanning alerts: every key's events arrive issued, exposed,
 *    revoked, never two at once to one endpoint;
 *  - SIGTERM while a delivery hangs (WEBHOOK_TIMEOUT_MS=30000): exit 0 within the grace period with
 *    the "shut down" line, the key used just before has its last_used_at, and the notification is
 *    due again at once (the next start delivers it without waiting for the lease).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import { silentLogger } from '@cos/core';
import { buildContainer, closeContainer, coreOf } from '../src/container.js';
import { loadConfig } from '../src/config.js';
import { cliJson, ensureBuilt, startServe, type Env, type ServeProcess } from './support/cli.js';
import { databaseTargets, type TestDatabase } from './support/databases.js';
import { makeScanner } from './support/scanner.js';

/**
 * What `serve` and `cos-admin org webhook set` need to deliver to a receiver on 127.0.0.1 over plain
 * http: the one place to allow local receivers (WEBHOOK_ALLOW_HTTP, WEBHOOK_ALLOW_PRIVATE).
 */
const LOCAL_RECEIVERS: Env = { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE: 'true' };

interface Arrival {
  readonly type: string;
  readonly keyId: string;
  readonly label: string;
  readonly at: number;
}

/** A webhook receiver on 127.0.0.1: records every request in arrival order; `hang` holds them unanswered. */
class Receiver {
  readonly arrivals: Arrival[] = [];
  hang = false;
  /** Most requests open at once. */
  mostAtOnce = 0;
  private open = 0;
  private readonly held = new Set<ServerResponse>();
  private constructor(private readonly server: Server) {}

  static async start(): Promise<Receiver> {
    let receiver!: Receiver;
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      receiver.open += 1;
      receiver.mostAtOnce = Math.max(receiver.mostAtOnce, receiver.open);
      res.on('close', () => (receiver.open -= 1));
      let text = '';
      req.setEncoding('utf8').on('data', (d: string) => (text += d));
      req.on('end', () => {
        const body = JSON.parse(text) as { type: string; data: { key_id: string; label: string } };
        receiver.arrivals.push({ type: body.type, keyId: body.data.key_id, label: body.data.label, at: Date.now() });
        if (receiver.hang) receiver.held.add(res);
        else res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    receiver = new Receiver(server);
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  async waitFor(what: (r: Receiver) => boolean, ms: number, label: string): Promise<void> {
    const deadline = Date.now() + ms;
    while (!what(this)) {
      if (Date.now() > deadline) throw new Error(`receiver: ${label} not within ${ms} ms; got ${JSON.stringify(this.arrivals.map((a) => a.type))}`);
      await sleep(10);
    }
  }

  close(): Promise<void> {
    for (const res of this.held) res.destroy();
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

interface Org {
  readonly id: string;
  /** A key of the organisation (its own requests, e.g. issuing keys). */
  readonly key: string;
}

for (const target of databaseTargets()) {
  describe(`webhook delivery through cos-admin serve on ${target.name} (C-59)`, function () {
    this.timeout(90_000);
    let db: TestDatabase;
    let env: Env;
    const servers: ServeProcess[] = [];
    const receivers: Receiver[] = [];

    before(ensureBuilt);
    beforeEach(async () => {
      db = await target.create();
      env = { DATABASE_URL: db.databaseUrl, PORT: '0', RATE_LIMIT_PER_MINUTE: '1000000', WEBHOOK_POLL_INTERVAL_MS: '100', ...LOCAL_RECEIVERS };
      await cliJson(['migrate'], env, db.cwd);
    });
    afterEach(async () => {
      for (const s of servers.splice(0)) s.kill();
      await Promise.all(receivers.splice(0).map((r) => r.close()));
      await db?.drop();
    });

    const serve = async (extra: Env = {}): Promise<{ s: ServeProcess; url: string }> => {
      const s = startServe([], { ...env, ...extra }, db.cwd);
      servers.push(s);
      return { s, url: (await s.listening()).url };
    };
    const receiver = async (): Promise<Receiver> => {
      const r = await Receiver.start();
      receivers.push(r);
      return r;
    };
    /** An organisation and one key of it (issued before its endpoint is set: no event for it). */
    const organisation = async (slug: string): Promise<Org> => {
      const org = await cliJson<{ id: string }>(['org', 'create', '--name', slug, '--slug', slug], env, db.cwd);
      const issued = await cliJson<{ key: string }>(['key', 'issue', org.id, '--label', 'own'], env, db.cwd);
      return { id: org.id, key: issued.key };
    };
    const setWebhook = (org: Org, r: Receiver) => cliJson(['org', 'webhook', 'set', org.id, '--url', r.url], env, db.cwd);
    /** Issues a key through the API (enqueues api_key.issued); returns the raw key. */
    const issue = async (base: string, org: Org, label: string): Promise<string> => {
      const res = await fetch(`${base}/v1/organisations/${org.id}/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ label }),
      });
      expect(res.status).to.equal(201);
      return ((await res.json()) as { key: string }).key;
    };
    const pendingOf = async (org: Org): Promise<Array<{ id: string; status: string; attempts: number }>> =>
      (await cliJson<{ data: Array<{ id: string; status: string; attempts: number }> }>(['notifications', 'list', '--org', org.id, '--status', 'pending', '--limit', '100'], env, db.cwd)).data;

    it('C-59: two instances; an endpoint that never answers, with 100 notifications queued, holds one attempt; another organisation\'s event arrives within 2 s', async () => {
      const dead = await organisation('dead');
      const live = await organisation('live');
      const deadRx = await receiver();
      const liveRx = await receiver();
      deadRx.hang = true;
      await setWebhook(dead, deadRx);
      await setWebhook(live, liveRx);
      // A timeout far beyond the test: the dead endpoint's first attempt is in flight throughout.
      // The default poll interval (1 s): the 2 s include finding the new notification.
      const a = await serve({ WEBHOOK_TIMEOUT_MS: '30000', WEBHOOK_POLL_INTERVAL_MS: '1000' });
      const b = await serve({ WEBHOOK_TIMEOUT_MS: '30000', WEBHOOK_POLL_INTERVAL_MS: '1000' });
      for (let i = 0; i < 100; i++) await issue(i % 2 === 0 ? a.url : b.url, dead, `dead-${i}`);
      await deadRx.waitFor((r) => r.arrivals.length >= 1, 5_000, 'the dead endpoint gets its first attempt');
      expect((await pendingOf(dead)).length, 'queued for the dead endpoint').to.equal(100);

      const t0 = Date.now();
      await issue(b.url, live, 'live-1');
      await liveRx.waitFor((r) => r.arrivals.length >= 1, 10_000, 'the live endpoint gets its event');
      const ms = liveRx.arrivals[0]!.at - t0;
      expect(liveRx.arrivals.map((x) => [x.type, x.label])).to.deep.equal([['api_key.issued', 'live-1']]);
      if (process.env['COS_TEST_VERBOSE']) console.log(`another organisation's event after ${ms} ms`);
      expect(ms, 'another organisation\'s event').to.be.below(2_000);
      expect(deadRx.arrivals, 'one attempt in flight to the dead endpoint, across both instances').to.have.length(1);
      expect(deadRx.arrivals[0]!.label).to.equal('dead-0');
    });

    it('C-59: two instances, 20 signed alerts: each key\'s events arrive issued, exposed, revoked, one at a time per endpoint', async () => {
      const scanner = makeScanner(db.cwd);
      env = { ...env, SECRET_SCANNING_PUBLIC_KEYS: scanner.keyFile };
      const org = await organisation('ordered');
      const rx = await receiver();
      await setWebhook(org, rx);
      const instances = [await serve(), await serve()];
      for (let i = 0; i < 20; i++) {
        const raw = await issue(instances[i % 2]!.url, org, `k${i}`);
        const alert = JSON.stringify([{ token: raw, type: 'cos_live_api_key', url: `https://paste.example/${i}`, source: 'content' }]);
        const res = await fetch(`${instances[(i + 1) % 2]!.url}/v1/secret-scanning/alerts`, { method: 'POST', headers: scanner.headers(alert), body: alert });
        expect(res.status).to.equal(200);
      }
      await rx.waitFor((r) => r.arrivals.length >= 60, 30_000, '60 events');
      await sleep(300); // room for a duplicate to show up
      expect(rx.arrivals).to.have.length(60);
      const byKey = new Map<string, string[]>();
      for (const x of rx.arrivals) byKey.set(x.keyId, [...(byKey.get(x.keyId) ?? []), x.type]);
      expect(byKey.size).to.equal(20);
      const order = [...byKey.values()].map((types) => types.join(' > '));
      expect(order).to.deep.equal(Array(20).fill('api_key.issued > api_key.exposed > api_key.revoked'));
      expect(rx.mostAtOnce, 'never two attempts at once to one endpoint').to.equal(1);
    });

    it('C-59: SIGTERM while a delivery hangs (WEBHOOK_TIMEOUT_MS=30000): exit 0 within the grace period, "shut down", last_used_at written, the notification due again at once', async () => {
      const org = await organisation('hung');
      const rx = await receiver();
      rx.hang = true;
      await setWebhook(org, rx);
      const { s, url } = await serve({ WEBHOOK_TIMEOUT_MS: '30000' });
      const own = { authorization: `Bearer ${org.key}` };
      expect((await fetch(`${url}/v1/organisations/${org.id}`, { headers: own })).status).to.equal(200);
      await issue(url, org, 'hung-1');
      await rx.waitFor((r) => r.arrivals.length === 1, 5_000, 'the delivery starts and hangs');
      await sleep(1_100);
      // The key used again just before the signal: the shutdown writes this use.
      const usedFrom = Date.now();
      expect((await fetch(`${url}/v1/organisations/${org.id}`, { headers: own })).status).to.equal(200);
      const usedTo = Date.now();
      const t0 = performance.now();
      s.child.kill('SIGTERM');
      const exit = await Promise.race([s.exited(), sleep(20_000).then(() => ({ code: null, signal: null }))]);
      const ms = performance.now() - t0;
      expect(exit, s.stdout() + s.stderr()).to.deep.equal({ code: 0, signal: null });
      expect(ms, 'within the 10 s grace period').to.be.below(10_000);
      const logs = s.logLines();
      expect(logs.some((l) => l['msg'] === 'shut down: pools closed')).to.equal(true);
      expect(logs.find((l) => /abandoned at shutdown/.test(String(l['msg'])))).to.include({ released: 1 });

      const keys = await cliJson<{ data: Array<{ label: string; last_used_at: string | null }> }>(['key', 'list', org.id], env, db.cwd);
      const lastUsed = keys.data.find((k) => k.label === 'own')!.last_used_at;
      expect(lastUsed, 'the use just before SIGTERM is written').to.be.a('string');
      expect(Date.parse(lastUsed!)).to.be.within(usedFrom - 50, usedTo + 1_000);
      const [pending, ...more] = await pendingOf(org);
      expect(more).to.deep.equal([]);
      expect(pending, 'still pending, the abandoned attempt counted').to.include({ status: 'pending', attempts: 1 });

      // Released, not left to its 61 s lease: the next start delivers it at once. Timed from the
      // moment the new serve listens (how long a start takes is the machine's, not the release's),
      // and against the abandoned attempt's lease, which began before its first arrival.
      rx.hang = false;
      await serve({ WEBHOOK_TIMEOUT_MS: '30000' });
      const t1 = Date.now();
      await rx.waitFor((r) => r.arrivals.length === 2, 15_000, 'delivered after the restart');
      expect(rx.arrivals[1]!.at - t1, 'delivered once the restarted serve listens').to.be.below(10_000);
      expect(rx.arrivals[1]!.at - rx.arrivals[0]!.at, "before the abandoned attempt's 61 s lease ended").to.be.below(60_000);
      expect(rx.arrivals.map((x) => x.label)).to.deep.equal(['hung-1', 'hung-1']);
      // The receiver has it; serve records the delivery once the answer is back: wait for that.
      let left = await pendingOf(org);
      for (const recorded = Date.now() + 5_000; left.length > 0 && Date.now() < recorded; left = await pendingOf(org)) await sleep(20);
      expect(left).to.deep.equal([]);
    });
  });
}

describe('webhook delivery configuration (C-59)', () => {
  const load = (env: Record<string, string>) => loadConfig({ DATABASE_URL: 'sqlite::memory:', ...env }, { envFile: false });

  it('WEBHOOK_TIMEOUT_MS is at most 30000 (the lease stays near a minute); WEBHOOK_CONCURRENCY is 1 to 1000, default 32', () => {
    expect(load({}).webhookTimeoutMs).to.equal(10_000);
    expect(load({ WEBHOOK_TIMEOUT_MS: '30000' }).webhookTimeoutMs).to.equal(30_000);
    for (const bad of ['30001', '600000']) {
      expect(() => load({ WEBHOOK_TIMEOUT_MS: bad }), bad).to.throw(/^invalid configuration: WEBHOOK_TIMEOUT_MS must be an integer from 100 to 30000$/);
    }
    expect(load({}).webhookConcurrency).to.equal(32);
    expect(load({ WEBHOOK_CONCURRENCY: '1' }).webhookConcurrency).to.equal(1);
    for (const bad of ['0', '1001', '2.5']) {
      expect(() => load({ WEBHOOK_CONCURRENCY: bad }), bad).to.throw(/^invalid configuration: WEBHOOK_CONCURRENCY must be an integer from 1 to 1000$/);
    }
  });

  it('serve\'s delivery (the core\'s) takes its attempts in flight from WEBHOOK_CONCURRENCY and its bound from WEBHOOK_TIMEOUT_MS', async () => {
    const config = load({ WEBHOOK_CONCURRENCY: '7', WEBHOOK_TIMEOUT_MS: '25000', WEBHOOK_MAX_ATTEMPTS: '4' });
    const container = await buildContainer(config, { logger: silentLogger });
    try {
      const delivery = coreOf(container).webhookDelivery;
      expect(delivery).not.to.equal(null);
      expect(delivery!.options).to.include({ batchSize: 7, timeoutMs: 25_000, maxAttempts: 4 });
    } finally {
      await closeContainer(container);
    }
  });
});
