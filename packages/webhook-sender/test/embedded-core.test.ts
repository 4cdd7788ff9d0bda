/**
 * An embedder's core delivers its webhooks (C-59) with nothing but `createCore`: a store, a counter
 * and a sender (createWebhookSender) go in; `core.webhookDelivery` comes out, started and stopped
 * by the host as it does `core.keyUsage`. No CLI, no container, the system clock and a real HTTP
 * receiver on 127.0.0.1 that verifies the signature as a customer would; every attempt is reported
 * to the core's Metrics port.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { InProcessRateCounter, OPERATOR, createCore, type Core } from '@cos/core';
import { RecordingMetrics, createInMemoryStore } from '@cos/core/testing';
import { createWebhookSender } from '@cos/webhook-sender';

interface Received {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A receiver that records every request and answers 204. */
async function startReceiver(): Promise<{ readonly url: string; readonly received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}

/** Waits (real time) until `done()` holds, or fails after `ms`. */
async function until(done: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const eventOf = (r: Received): { type: string; data: { key_id: string } } => JSON.parse(r.body) as { type: string; data: { key_id: string } };

describe('webhook-sender: an embedder\'s createCore delivers webhooks through core.webhookDelivery (C-59)', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let core: Core;

  beforeEach(async () => {
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await core?.webhookDelivery?.stop();
    await receiver.close();
  });

  it('C-59: a key revoked through the core reaches the endpoint, signed with the endpoint\'s secret, and the attempt is counted as delivered', async () => {
    const store = createInMemoryStore();
    const metrics = new RecordingMetrics();
    core = createCore({
      stores: store.stores,
      unitOfWork: store.unitOfWork,
      health: store.health,
      counter: new InProcessRateCounter(),
      metrics,
      // A loopback http receiver: both the endpoint's configuration and the sender opt in.
      config: { webhookAllowHttp: true, webhookAllowPrivate: true },
      webhookSender: createWebhookSender({ allowHttp: true, allowPrivate: true }),
      webhookDelivery: { pollIntervalMs: 50, timeoutMs: 2_000 },
    });
    expect(core.webhookDelivery, 'a sender was given: the core delivers').not.to.equal(null);
    core.webhookDelivery!.start();

    const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    const secret = (await core.webhooks.set(OPERATOR, org.id, receiver.url)).newSecret!;
    const issued = await core.apiKeys.issue(OPERATOR, org.id, { label: 'billing' });
    await core.apiKeys.revoke(OPERATOR, org.id, issued.key.id);

    await until(() => receiver.received.some((r) => eventOf(r).type === 'api_key.revoked'), 10_000, 'api_key.revoked');
    const events = receiver.received.map(eventOf);
    expect(events.map((e) => e.type)).to.deep.equal(['api_key.issued', 'api_key.revoked']);
    for (const e of events) expect(e.data.key_id).to.equal(issued.key.id);
    for (const r of receiver.received) {
      expect(() => new Webhook(secret).verify(r.body, r.headers as Record<string, string>)).not.to.throw();
      expect(r.body).not.to.include(issued.rawKey);
    }
    await until(() => metrics.of('webhookDelivery').length === 2, 5_000, 'both attempts counted');
    expect(metrics.of('webhookDelivery').map((e) => e.result)).to.deep.equal(['delivered', 'delivered']);
    await core.webhookDelivery!.stop();
    const outbox = await store.stores.outbox.list({}, { after: null, limit: 10 });
    expect(outbox.map((n) => n.status)).to.deep.equal(['delivered', 'delivered']);
  });

  it('C-59: without a sender the core has no delivery, and its notifications wait in the outbox', async () => {
    const store = createInMemoryStore();
    core = createCore({
      stores: store.stores,
      unitOfWork: store.unitOfWork,
      health: store.health,
      counter: new InProcessRateCounter(),
      config: { webhookAllowHttp: true, webhookAllowPrivate: true },
    });
    expect(core.webhookDelivery).to.equal(null);
    const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    await core.webhooks.set(OPERATOR, org.id, receiver.url);
    const issued = await core.apiKeys.issue(OPERATOR, org.id, { label: 'billing' });
    await core.apiKeys.revoke(OPERATOR, org.id, issued.key.id);
    const outbox = await store.stores.outbox.list({}, { after: null, limit: 10 });
    expect(outbox.map((n) => n.status)).to.deep.equal(['pending', 'pending']);
    expect(receiver.received).to.deep.equal([]);
  });
});
