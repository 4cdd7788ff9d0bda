/**
 * WebhookDelivery (core) + createWebhookSender (this package) end to end (C-59): notifications the
 * core wrote to the in-memory outbox are delivered to a REAL HTTP receiver (node:http on
 * 127.0.0.1, ephemeral port) that verifies them with `standardwebhooks` as a customer would.
 * Time between attempts is driven by a FakeClock (started at the real time, so the receiver's
 * timestamp tolerance holds) and explicit deliverDue() rounds; timeouts are real. The receiver is
 * plain http on loopback, so the core and the sender opt in to both (WEBHOOK_ALLOW_HTTP and
 * WEBHOOK_ALLOW_PRIVATE in `serve`).
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import {
  NO_ENDPOINT_ERROR,
  OPERATOR,
  WebhookDelivery,
  cryptoRandom,
  digestKey,
  retryDelayMs,
  type Notification,
  type WebhookDeliveryOptions,
} from '@cos/core';
import { FakeClock, createTestCore, type TestCore } from '@cos/core/testing';
import { createWebhookSender, signedHeaders } from '@cos/webhook-sender';

interface Received {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** How the receiver answers one request. */
interface Answer {
  readonly status: number;
  readonly headers?: Record<string, string>;
  /** Answer only after this many (real) ms. */
  readonly delayMs?: number;
}

/** A real HTTP receiver: records every request and answers from a script (then 204). */
class Receiver {
  readonly received: Received[] = [];
  readonly script: Answer[] = [];
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(port = 0): Promise<Receiver> {
    let receiver!: Receiver;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        receiver.received.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        const answer = receiver.script.shift() ?? { status: 204 };
        const send = (): void => {
          if (!res.destroyed) res.writeHead(answer.status, answer.headers).end();
        };
        if (answer.delayMs === undefined) send();
        else setTimeout(send, answer.delayMs);
      });
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    receiver = new Receiver(server, (server.address() as AddressInfo).port);
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  /** Requests to the endpoint path (a redirect target is elsewhere). */
  hooks(): Received[] {
    return this.received.filter((r) => r.path === '/hook');
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve, reject) => this.server.close((err) => (err ? reject(err) : resolve())));
  }
}

/** A port nothing listens on (bound once, then released). */
async function closedPort(): Promise<number> {
  const r = await Receiver.start();
  await r.close();
  return r.port;
}

/** The opt-in a loopback http receiver needs, in the core (configuration) and in the sender (delivery). */
const LOCAL = { allowHttp: true, allowPrivate: true } as const;
const LOCAL_CONFIG = { webhookAllowHttp: true, webhookAllowPrivate: true } as const;

const OPTIONS: Partial<WebhookDeliveryOptions> = { timeoutMs: 1_000, maxAttempts: 4, retryBaseMs: 1_000, retryMaxMs: 60_000, batchSize: 10 };

interface Setup {
  readonly tc: TestCore;
  readonly orgId: string;
  readonly secret: string;
  readonly delivery: WebhookDelivery;
}

/** A core over the in-memory store whose clock starts now; one organisation with an endpoint at `url`. */
async function setup(url: string, options: Partial<WebhookDeliveryOptions> = {}): Promise<Setup> {
  const tc = createTestCore({ clock: new FakeClock(new Date()), config: LOCAL_CONFIG });
  const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
  const change = await tc.core.webhooks.set(OPERATOR, org.id, url);
  return { tc, orgId: org.id, secret: change.newSecret!, delivery: newDelivery(tc, { ...OPTIONS, ...options }) };
}

function newDelivery(tc: TestCore, options: Partial<WebhookDeliveryOptions> = OPTIONS): WebhookDelivery {
  return new WebhookDelivery({
    stores: tc.store.stores,
    sender: createWebhookSender(LOCAL),
    clock: tc.clock,
    random: cryptoRandom,
    logger: tc.logger,
    options,
  });
}

/** Issues a key (which enqueues `api_key.issued`) and returns its notification and raw key. */
async function issue(s: Setup, label = 'ci'): Promise<{ notification: Notification; rawKey: string }> {
  const issued = await s.tc.core.apiKeys.issue(OPERATOR, s.orgId, { label });
  const all = await s.tc.store.stores.outbox.list({}, { after: null, limit: 1000 });
  const notification = all.find((n) => (JSON.parse(n.payload) as { data: { key_id: string } }).data.key_id === issued.key.id)!;
  return { notification, rawKey: issued.rawKey };
}

const find = async (s: Setup, id: string): Promise<Notification> => (await s.tc.store.stores.outbox.findById(id))!;

/** Moves the FakeClock to the notification's next attempt and runs one round. */
async function nextRound(s: Setup, id: string): Promise<number> {
  s.tc.clock.set((await find(s, id)).nextAttemptAt);
  return s.delivery.deliverDue();
}

function verifyWith(secret: string, r: Received): unknown {
  return new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
}

describe('webhook-sender: WebhookDelivery over real HTTP (C-59)', () => {
  let receiver: Receiver;
  beforeEach(async () => {
    receiver = await Receiver.start();
  });
  afterEach(async () => {
    await receiver.close();
  });

  it('C-59: after rotate-secret with an overlap, every delivery carries both signatures (new first) until it ends, then only the new one', async () => {
    const s = await setup(receiver.url);
    const old = s.secret;
    const rotated = await s.tc.core.webhooks.rotateSecret(OPERATOR, s.orgId, 60);
    const fresh = rotated.newSecret!;
    expect(rotated.previousSecretExpiresAt?.getTime()).to.equal(s.tc.clock.now().getTime() + 60_000);
    await issue(s, 'during');
    await s.delivery.deliverDue();
    const during = receiver.hooks()[0]!;
    const signatures = String(during.headers['webhook-signature']).split(' ');
    expect(signatures).to.have.length(2);
    // Each signature is the one that secret alone makes, new first; either secret verifies the delivery.
    expect(signatures[0]).to.equal(signedHeaders({ secret: fresh, messageId: String(during.headers['webhook-id']), timestamp: new Date(Number(during.headers['webhook-timestamp']) * 1000), body: during.body })['webhook-signature']);
    expect(signatures[1]).to.equal(signedHeaders({ secret: old, messageId: String(during.headers['webhook-id']), timestamp: new Date(Number(during.headers['webhook-timestamp']) * 1000), body: during.body })['webhook-signature']);
    expect(() => verifyWith(fresh, during)).to.not.throw();
    expect(() => verifyWith(old, during)).to.not.throw();

    // Within the receiver's timestamp tolerance (5 min): the FakeClock signs the timestamp.
    s.tc.clock.advance(60_000);
    await issue(s, 'after');
    await s.delivery.deliverDue();
    const after = receiver.hooks()[1]!;
    expect(String(after.headers['webhook-signature']).split(' ')).to.have.length(1);
    expect(() => verifyWith(fresh, after)).to.not.throw();
    expect(() => verifyWith(old, after)).to.throw();

    // overlap 0: the old secret stops at once.
    const instant = await s.tc.core.webhooks.rotateSecret(OPERATOR, s.orgId, 0);
    expect(instant.previousSecretExpiresAt).to.equal(null);
    await issue(s, 'instant');
    await s.delivery.deliverDue();
    const last = receiver.hooks()[2]!;
    expect(String(last.headers['webhook-signature']).split(' ')).to.have.length(1);
    expect(() => verifyWith(instant.newSecret!, last)).to.not.throw();
    expect(() => verifyWith(fresh, last)).to.throw();
  });

  it('C-59: a delivery is signed (standardwebhooks verifies it), webhook-id is the notification id, and the body is the payload', async () => {
    const s = await setup(receiver.url);
    const { notification } = await issue(s);
    expect(await s.delivery.deliverDue()).to.equal(1);
    const [got] = receiver.hooks();
    expect(got!.headers['webhook-id']).to.equal(notification.id);
    expect(got!.headers['content-type']).to.equal('application/json');
    expect(got!.headers['user-agent']).to.equal('cos-webhooks/1');
    expect(got!.body).to.equal(notification.payload);
    expect(verifyWith(s.secret, got!)).to.deep.equal(JSON.parse(notification.payload));
    // Another secret, or a changed body, does not verify.
    const other = (await setup(receiver.url)).secret;
    expect(() => verifyWith(other, got!)).to.throw();
    expect(() => verifyWith(s.secret, { ...got!, body: got!.body.replace('ci', 'cj') })).to.throw();
    const done = await find(s, notification.id);
    expect(done).to.include({ status: 'delivered', attempts: 1, lastError: null });
    expect(done.completedAt!.getTime()).to.equal(s.tc.clock.now().getTime());
  });

  it('C-59, C-58: what the receiver gets holds neither the raw key nor its digest', async () => {
    const s = await setup(receiver.url);
    const { rawKey } = await issue(s);
    await s.tc.core.apiKeys.revoke(OPERATOR, s.orgId, (await s.tc.store.stores.apiKeys.list(s.orgId, { after: null, limit: 10 }))[0]!.id);
    expect(await s.delivery.deliverDue()).to.equal(2);
    const wire = JSON.stringify(receiver.hooks());
    expect(receiver.hooks().map((r) => (JSON.parse(r.body) as { type: string }).type).sort()).to.deep.equal(['api_key.issued', 'api_key.revoked']);
    expect(wire).to.not.include(rawKey);
    expect(wire).to.not.include(digestKey(rawKey));
    expect(wire).to.not.include(rawKey.slice(12));
  });

  it('C-59: 500 then 200: delivered on the retry, the same webhook-id, next attempt after retryDelayMs ± 20 %', async () => {
    const s = await setup(receiver.url);
    const { notification } = await issue(s);
    receiver.script.push({ status: 500 }, { status: 503 });
    const failedAt = s.tc.clock.now().getTime();
    await s.delivery.deliverDue();
    let n = await find(s, notification.id);
    expect(n).to.include({ status: 'pending', attempts: 1, lastError: 'answered 500' });
    const first = retryDelayMs(1, { retryBaseMs: 1_000, retryMaxMs: 60_000 });
    expect(n.nextAttemptAt.getTime() - failedAt).to.be.within(0.8 * first, 1.2 * first);

    // Not due yet: nothing is attempted.
    s.tc.clock.set(new Date(n.nextAttemptAt.getTime() - 1));
    expect(await s.delivery.deliverDue()).to.equal(0);

    await nextRound(s, notification.id);
    n = await find(s, notification.id);
    expect(n).to.include({ status: 'pending', attempts: 2, lastError: 'answered 503' });
    const second = retryDelayMs(2, { retryBaseMs: 1_000, retryMaxMs: 60_000 });
    expect(second).to.equal(4 * first);
    expect(n.nextAttemptAt.getTime() - s.tc.clock.now().getTime()).to.be.within(0.8 * second, 1.2 * second);

    await nextRound(s, notification.id);
    n = await find(s, notification.id);
    expect(n).to.include({ status: 'delivered', attempts: 3 });
    const ids = receiver.hooks().map((r) => r.headers['webhook-id']);
    expect(ids).to.deep.equal([notification.id, notification.id, notification.id]);
    for (const r of receiver.hooks()) expect(verifyWith(s.secret, r)).to.deep.equal(JSON.parse(notification.payload));
  });

  it('C-59: jitter keeps every first retry within ±20 % of the base delay, and not all on one value', async () => {
    const port = await closedPort();
    const s = await setup(`http://127.0.0.1:${port}/hook`);
    const at = s.tc.clock.now().getTime();
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push((await issue(s, `k${i}`)).notification.id);
    expect(await s.delivery.deliverDue()).to.equal(10);
    const delays = await Promise.all(ids.map(async (id) => (await find(s, id)).nextAttemptAt.getTime() - at));
    for (const d of delays) expect(d).to.be.within(800, 1200);
    expect(new Set(delays).size).to.be.greaterThan(1);
  });

  it('C-59: receiver down (connection refused), then up on the same port: delivered', async () => {
    const port = await closedPort();
    const s = await setup(`http://127.0.0.1:${port}/hook`);
    const { notification } = await issue(s);
    await s.delivery.deliverDue();
    const n = await find(s, notification.id);
    expect(n.status).to.equal('pending');
    expect(n.lastError).to.match(/^connection failed \(ECONNREFUSED\)$/);
    const up = await Receiver.start(port);
    try {
      await nextRound(s, notification.id);
      expect(await find(s, notification.id)).to.include({ status: 'delivered', attempts: 2 });
      expect(up.hooks().map((r) => r.headers['webhook-id'])).to.deep.equal([notification.id]);
      expect(verifyWith(s.secret, up.hooks()[0]!)).to.be.an('object');
    } finally {
      await up.close();
    }
  });

  it('C-59: a receiver slower than timeoutMs is a timeout failure, retried', async () => {
    const s = await setup(receiver.url, { timeoutMs: 200 });
    const { notification } = await issue(s);
    receiver.script.push({ status: 200, delayMs: 800 });
    const started = Date.now();
    await s.delivery.deliverDue();
    expect(Date.now() - started).to.be.below(700);
    expect(await find(s, notification.id)).to.include({ status: 'pending', attempts: 1, lastError: 'no answer within 200 ms' });
    await nextRound(s, notification.id);
    expect(await find(s, notification.id)).to.include({ status: 'delivered', attempts: 2 });
  });

  it('C-59: after maxAttempts failures the notification is failed with last_error, and no longer attempted', async () => {
    const s = await setup(receiver.url);
    const { notification } = await issue(s);
    for (let i = 0; i < 4; i++) receiver.script.push({ status: 500 + i });
    await s.delivery.deliverDue();
    for (let i = 2; i <= 4; i++) await nextRound(s, notification.id);
    const n = await find(s, notification.id);
    expect(n).to.include({ status: 'failed', attempts: 4, lastError: 'answered 503' });
    expect(n.completedAt!.getTime()).to.equal(s.tc.clock.now().getTime());
    s.tc.clock.advance(24 * 60 * 60 * 1000);
    expect(await s.delivery.deliverDue()).to.equal(0);
    expect(receiver.hooks()).to.have.length(4);
    const givenUp = s.tc.logger.entries.filter((e) => /given up/.test(e.message));
    expect(givenUp.map((e) => [e.level, e.fields['notification_id'], e.fields['attempts'], e.fields['error']])).to.deep.equal([
      ['error', notification.id, 4, 'answered 503'],
    ]);
  });

  it('C-59: a notification whose organisation has no endpoint any more fails at once, nothing sent; each one given up is logged once with its id', async () => {
    const s = await setup(receiver.url);
    const { notification } = await issue(s);
    const second = (await issue(s, 'second')).notification;
    await s.tc.core.webhooks.remove(OPERATOR, s.orgId);
    expect(await s.delivery.deliverDue()).to.equal(2);
    expect(await find(s, notification.id)).to.include({ status: 'failed', attempts: 1, lastError: NO_ENDPOINT_ERROR });
    expect(receiver.received).to.deep.equal([]);
    // Both within the interval that folds failed-attempt lines together: a give-up is never folded.
    const givenUp = s.tc.logger.entries.filter((e) => /given up/.test(e.message)).map((e) => e.fields['notification_id']);
    expect(givenUp.sort()).to.deep.equal([notification.id, second.id].sort());
    expect(await s.delivery.deliverDue()).to.equal(0);
    expect(s.tc.logger.entries.filter((e) => /given up/.test(e.message))).to.have.length(2);
  });

  it('C-59: a redirect (302) is a failure and is not followed', async () => {
    const s = await setup(receiver.url);
    const { notification } = await issue(s);
    receiver.script.push({ status: 302, headers: { location: `http://127.0.0.1:${receiver.port}/elsewhere` } });
    await s.delivery.deliverDue();
    expect(await find(s, notification.id)).to.include({ status: 'pending', attempts: 1, lastError: 'answered 302' });
    expect(receiver.received.map((r) => r.path)).to.deep.equal(['/hook']);
  });

  it('C-59: a failure never records or logs the endpoint URL\'s credentials or query', async () => {
    // The use case refuses such a URL now; an endpoint stored before that rule (or by an embedder
    // writing the store directly) must still not leak through the sender's error text.
    const s = await setup(receiver.url);
    const endpoint = (await s.tc.store.stores.webhooks.get(s.orgId))!;
    await s.tc.store.stores.webhooks.put({ ...endpoint, url: `http://hook-user:s3cret-pw@127.0.0.1:${receiver.port}/hook?token=q-s3cret` });
    const { notification } = await issue(s);
    await s.delivery.deliverDue();
    const n = await find(s, notification.id);
    expect(n).to.include({ status: 'pending', attempts: 1 });
    expect(n.lastError).to.match(/^request failed \(/);
    const recorded = JSON.stringify([n, s.tc.logger.entries]);
    expect(recorded).to.not.include('s3cret');
    expect(receiver.received).to.deep.equal([]);
  });

  it('C-59: a claim held by another sender (lease not expired) is not attempted; once the lease ends it is, and the stale claim records nothing', async () => {
    const s = await setup(receiver.url);
    const { notification } = await issue(s);
    const now = s.tc.clock.now();
    const leaseUntil = new Date(now.getTime() + 60_000);
    const held = await s.tc.store.stores.outbox.claimDue(now, leaseUntil, 10, 'another-sender:1');
    expect(held.map((n) => n.id)).to.deep.equal([notification.id]);
    expect(await s.delivery.deliverDue()).to.equal(0);
    s.tc.clock.set(new Date(leaseUntil.getTime() - 1));
    expect(await s.delivery.deliverDue()).to.equal(0);
    expect(receiver.received).to.deep.equal([]);

    s.tc.clock.set(leaseUntil);
    expect(await s.delivery.deliverDue()).to.equal(1);
    expect(await find(s, notification.id)).to.include({ status: 'delivered', attempts: 2 });
    const stale = await s.tc.store.stores.outbox.complete(notification.id, 'another-sender:1', { status: 'failed', at: now, error: 'late' });
    expect(stale).to.equal(false);
    expect(await find(s, notification.id)).to.include({ status: 'delivered', lastError: null });
  });

  it('C-59: two WebhookDelivery instances over one store, polling concurrently, deliver each notification exactly once', async () => {
    const s = await setup(receiver.url, { batchSize: 3 });
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push((await issue(s, `k${i}`)).notification.id);
    const other = newDelivery(s.tc, { ...OPTIONS, batchSize: 3 });
    let rounds = 0;
    for (;;) {
      const [a, b] = await Promise.all([s.delivery.deliverDue(), other.deliverDue()]);
      if (a + b === 0) break;
      expect(++rounds).to.be.below(20);
    }
    const got = receiver.hooks().map((r) => r.headers['webhook-id'] as string);
    expect(got.slice().sort()).to.deep.equal(ids.slice().sort());
    for (const id of ids) expect(await find(s, id)).to.include({ status: 'delivered', attempts: 1 });
  });

  it('signedHeaders signs exactly what createWebhookSender sends (receivers can test against it)', async () => {
    const s = await setup(receiver.url);
    const { notification } = await issue(s);
    await s.delivery.deliverDue();
    const [got] = receiver.hooks();
    const timestamp = new Date(Number(got!.headers['webhook-timestamp']) * 1000);
    expect(signedHeaders({ secret: s.secret, messageId: notification.id, timestamp, body: got!.body })).to.deep.equal({
      'webhook-id': got!.headers['webhook-id'],
      'webhook-timestamp': got!.headers['webhook-timestamp'],
      'webhook-signature': got!.headers['webhook-signature'],
    });
  });
});
