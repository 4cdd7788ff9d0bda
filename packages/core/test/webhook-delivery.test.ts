/**
 * WebhookDelivery's scheduling (C-59) over the in-memory store (held to the same Outbox contract as
 * the SQL stores): per endpoint one attempt at a time in write order, a slow or dead endpoint holding
 * one slot only, a freed slot used at once, and stop() abandoning what is in flight (released, due
 * again). The sender is an in-process double of the WebhookSender port whose answers the test holds
 * and gives; the same behaviours over real HTTP, SQLite and Postgres are in packages/cli/test.
 */
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  OPERATOR,
  WebhookDelivery,
  cryptoRandom,
  type Notification,
  type WebhookDeliveryOptions,
  type WebhookRequest,
  type WebhookResult,
  type WebhookSender,
} from '@cos/core';
import { FakeClock, createTestCore, type TestCore } from '@cos/core/testing';

/** One request the sender got, with the means to answer it. */
interface Held {
  readonly request: WebhookRequest;
  readonly type: string;
  answer(result: WebhookResult): void;
  /** Set once the request's signal was aborted. */
  aborted: boolean;
}

/**
 * The WebhookSender port as a test controls it: requests to a URL in `hang` are held until the test
 * answers them (like a receiver that never answers, and a sender that ignores the abort); the rest
 * answer 204 at once, or what `failNext` says.
 */
class HeldSender implements WebhookSender {
  readonly requests: Held[] = [];
  readonly hang = new Set<string>();
  readonly failNext = new Map<string, number>();
  private readonly open = new Map<string, number>();
  /** Most requests in flight at once to one URL. */
  readonly mostAtOnce = new Map<string, number>();

  send(request: WebhookRequest): Promise<WebhookResult> {
    const type = (JSON.parse(request.body) as { type: string }).type;
    const n = (this.open.get(request.url) ?? 0) + 1;
    this.open.set(request.url, n);
    this.mostAtOnce.set(request.url, Math.max(n, this.mostAtOnce.get(request.url) ?? 0));
    return new Promise<WebhookResult>((resolve) => {
      const held: Held = {
        request,
        type,
        aborted: false,
        answer: (result) => {
          this.open.set(request.url, (this.open.get(request.url) ?? 1) - 1);
          resolve(result);
        },
      };
      request.signal?.addEventListener('abort', () => (held.aborted = true), { once: true });
      this.requests.push(held);
      if (this.hang.has(request.url)) return;
      const failures = this.failNext.get(request.url) ?? 0;
      if (failures > 0) {
        this.failNext.set(request.url, failures - 1);
        held.answer({ ok: false, error: 'answered 503' });
      } else {
        held.answer({ ok: true, status: 204 });
      }
    });
  }

  to(url: string): Held[] {
    return this.requests.filter((r) => r.request.url === url);
  }
}

/** Polls `what` every 5 ms until true, or fails after `ms`. */
async function until(what: () => boolean | Promise<boolean>, ms: number, label: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await what())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${label}`);
    await sleep(5);
  }
}

interface Setup {
  readonly tc: TestCore;
  /** Stops every WebhookDelivery made. */
  close(): Promise<void>;
  readonly sender: HeldSender;
  delivery(options?: Partial<WebhookDeliveryOptions>): WebhookDelivery;
  /** A new organisation whose endpoint is `https://<name>.example/hook` (the sender is a double: nothing resolves it); returns its id and URL. */
  organisation(name: string): Promise<{ id: string; url: string }>;
  /** Issues a key for the organisation (enqueues api_key.issued) and returns the raw key. */
  issue(orgId: string, label?: string): Promise<string>;
  find(id: string): Promise<Notification>;
  pending(orgId: string): Promise<Notification[]>;
}

function setup(): Setup {
  const tc = createTestCore({ clock: new FakeClock(new Date()) });
  const sender = new HeldSender();
  const made: WebhookDelivery[] = [];
  return {
    tc,
    sender,
    async close() {
      for (const d of made.splice(0)) await d.stop();
    },
    delivery(options = {}) {
      const d = new WebhookDelivery({
        stores: tc.store.stores,
        sender,
        clock: tc.clock,
        random: cryptoRandom,
        logger: tc.logger,
        options: { timeoutMs: 1_000, retryBaseMs: 1_000, pollIntervalMs: 60_000, ...options },
      });
      made.push(d);
      return d;
    },
    async organisation(name) {
      const org = await tc.core.organisations.create(OPERATOR, { name, slug: `${name}-${cryptoRandom.uuid().slice(0, 8)}` });
      const url = `https://${name}.example/hook`;
      // Straight into the store: what is delivered here, not which URLs configuration accepts.
      const now = tc.clock.now();
      await tc.store.stores.webhooks.put({ organisationId: org.id, url, secret: `whsec_${Buffer.alloc(32, 1).toString('base64')}`, createdAt: now, updatedAt: now });
      return { id: org.id, url };
    },
    async issue(orgId, label = 'k') {
      return (await tc.core.apiKeys.issue(OPERATOR, orgId, { label })).rawKey;
    },
    async find(id) {
      return (await tc.store.stores.outbox.findById(id))!;
    },
    async pending(orgId) {
      return tc.store.stores.outbox.list({ organisationId: orgId, status: 'pending' }, { after: null, limit: 1000 });
    },
  };
}

describe('WebhookDelivery: per endpoint, one attempt at a time, in write order (C-59)', function () {
  this.timeout(10_000);
  let s: Setup;
  beforeEach(() => {
    s = setup();
  });
  afterEach(async () => {
    await s.close();
  });

  it('C-59: an endpoint that never answers, with 100 notifications queued, holds one slot: another organisation is delivered at once', async () => {
    const dead = await s.organisation('dead');
    const live = await s.organisation('live');
    s.sender.hang.add(dead.url);
    for (let i = 0; i < 100; i++) await s.issue(dead.id, `d${i}`);
    // Polled every 20 ms: the other organisation's notification is written after the start.
    const delivery = s.delivery({ batchSize: 10, pollIntervalMs: 20 });
    delivery.start();
    await until(() => s.sender.to(dead.url).length === 1, 2_000, 'the dead endpoint gets its first notification');
    await s.issue(live.id, 'live');
    await until(() => s.sender.to(live.url).length === 1, 2_000, 'the live endpoint gets its notification');
    await until(async () => (await s.pending(live.id)).length === 0, 2_000, 'and it is recorded delivered');
    expect(s.sender.to(dead.url), 'one attempt in flight to the dead endpoint, not ten').to.have.length(1);
    expect(s.sender.mostAtOnce.get(dead.url)).to.equal(1);
  });

  it('C-59: an endpoint gets its notifications one at a time in write order (exposed before revoked, 20 alerts)', async () => {
    const org = await s.organisation('ordered');
    const delivery = s.delivery({ batchSize: 10, pollIntervalMs: 20 });
    delivery.start();
    for (let i = 0; i < 20; i++) {
      const raw = await s.issue(org.id, `k${i}`);
      await s.tc.core.secretScanning.report([{ token: raw, type: 'cos_api_key', url: `https://paste.example/${i}` }]);
    }
    await until(async () => (await s.pending(org.id)).length === 0, 5_000, 'all delivered');
    const keyOf = (h: Held): string => (JSON.parse(h.request.body) as { data: { key_id: string } }).data.key_id;
    const byKey = new Map<string, string[]>();
    for (const h of s.sender.to(org.url)) byKey.set(keyOf(h), [...(byKey.get(keyOf(h)) ?? []), h.type]);
    expect(byKey.size).to.equal(20);
    for (const types of byKey.values()) expect(types).to.deep.equal(['api_key.issued', 'api_key.exposed', 'api_key.revoked']);
    expect(s.sender.mostAtOnce.get(org.url), 'never two attempts at once to one endpoint').to.equal(1);
  });

  it('C-59: a slot freed by one endpoint is used at once, not after the slow attempts of the same claim', async () => {
    const slow = await s.organisation('slow');
    const fast = await s.organisation('fast');
    s.sender.hang.add(slow.url);
    await s.issue(slow.id, 's1');
    await s.issue(fast.id, 'f1');
    await s.issue(fast.id, 'f2');
    await s.issue(fast.id, 'f3');
    // Two slots: the slow endpoint's attempt holds one the whole test; the other serves `fast` three times.
    const delivery = s.delivery({ batchSize: 2 });
    delivery.start();
    await until(() => s.sender.to(fast.url).length === 3, 2_000, 'three deliveries to the fast endpoint while the slow one hangs');
    expect(s.sender.to(slow.url)).to.have.length(1);
    expect(s.sender.to(fast.url).map((h) => JSON.parse(h.request.body).data.label)).to.deep.equal(['f1', 'f2', 'f3']);
  });

  it('C-59: while an earlier notification backs off, the later ones are sent; due again, it goes before the ones written after them', async () => {
    const org = await s.organisation('flaky');
    s.sender.failNext.set(org.url, 1);
    for (const label of ['a', 'b', 'c']) await s.issue(org.id, label);
    const delivery = s.delivery();
    expect(await delivery.deliverDue(), 'a fails, b and c are delivered').to.equal(3);
    const labels = (): string[] => s.sender.to(org.url).map((h) => JSON.parse(h.request.body).data.label as string);
    expect(labels()).to.deep.equal(['a', 'b', 'c']);
    const [a] = await s.pending(org.id);
    expect(a).to.include({ attempts: 1, lastError: 'answered 503' });
    await s.issue(org.id, 'd');
    s.tc.clock.set(a!.nextAttemptAt);
    expect(await delivery.deliverDue()).to.equal(2);
    expect(labels()).to.deep.equal(['a', 'b', 'c', 'a', 'd']);
    expect(await s.pending(org.id)).to.deep.equal([]);
  });

  it('C-59: deliverDue attempts each due notification once (no endless retry within a call) and counts the attempts', async () => {
    const org = await s.organisation('down');
    s.sender.failNext.set(org.url, 1_000);
    for (let i = 0; i < 5; i++) await s.issue(org.id, `k${i}`);
    const delivery = s.delivery();
    expect(await delivery.deliverDue()).to.equal(5);
    expect(await delivery.deliverDue(), 'all backing off').to.equal(0);
    expect(s.sender.requests).to.have.length(5);
  });

  it('C-59: stop() aborts the attempt in flight without waiting for the sender, releases its claim (due again at once), and says so', async () => {
    const dead = await s.organisation('hung');
    s.sender.hang.add(dead.url);
    await s.issue(dead.id, 'first');
    await s.issue(dead.id, 'second');
    const delivery = s.delivery({ timeoutMs: 30_000 });
    delivery.start();
    await until(() => s.sender.requests.length === 1, 2_000, 'the attempt starts');
    const held = s.sender.requests[0]!;
    const t0 = Date.now();
    await delivery.stop();
    expect(Date.now() - t0, 'stop does not wait for the sender').to.be.below(1_000);
    expect(held.aborted, 'the sender is told through the signal').to.equal(true);
    const pending = await s.pending(dead.id);
    expect(pending).to.have.length(2);
    // Listed by (createdAt, id): both have one createdAt here, so pick them by id.
    const first = pending.find((n) => n.id === held.request.messageId);
    const second = pending.find((n) => n.id !== held.request.messageId);
    expect(JSON.parse(first!.payload).data.label, 'the one written first was sent').to.equal('first');
    expect(first, 'still pending, the started attempt counted').to.include({ status: 'pending', attempts: 1, lastError: null });
    // Released: another sender claims it at once (not after the 61 s lease), before the second.
    const claimed = await s.tc.store.stores.outbox.claimDue(s.tc.clock.now(), new Date(s.tc.clock.now().getTime() + 1_000), 10, 'other-instance');
    expect(claimed.map((n) => n.id)).to.deep.equal([first!.id]);
    expect(second).to.include({ attempts: 0 });
    expect(s.tc.logger.entries.some((e) => e.level === 'info' && /abandoned at shutdown/.test(e.message) && e.fields['released'] === 1)).to.equal(true);
    // The sender's late answer changes nothing.
    held.answer({ ok: true, status: 204 });
    await sleep(10);
    expect(await s.find(first!.id)).to.include({ status: 'pending', attempts: 2 });
    expect(s.sender.requests, 'nothing more is sent after stop').to.have.length(1);
  });
});
