/**
 * An expiry notice end to end (C-280..C-282, C-59): the core's own ExpiryNotices finds a key with
 * less than its organisation's notice period left, its WebhookDelivery sends `api_key.expiring`
 * through createWebhookSender to a REAL HTTP receiver (node:http on 127.0.0.1) that verifies it
 * with `standardwebhooks` as a customer would; a first attempt answered 503 is retried like any
 * other event. The FakeClock starts at the real time, so the receiver's timestamp tolerance holds.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { OPERATOR } from '@cos/core';
import { FakeClock, createTestCore } from '@cos/core/testing';
import { createWebhookSender } from '@cos/webhook-sender';

interface Received {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

const DAY = 86_400_000;

describe('webhook-sender: an api_key.expiring notice reaches a real receiver, signed (C-281)', () => {
  let server: Server;
  let url: string;
  const received: Received[] = [];
  const statuses: number[] = [];

  beforeEach(async () => {
    received.length = 0;
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(statuses.shift() ?? 204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
  });

  it('C-281, C-282: scanned once, delivered after one retry, verified with standardwebhooks; a second scan sends nothing more', async () => {
    const tc = createTestCore({
      clock: new FakeClock(new Date()),
      config: { webhookAllowHttp: true, webhookAllowPrivate: true },
      webhookSender: createWebhookSender({ allowHttp: true, allowPrivate: true }),
      webhookDelivery: { timeoutMs: 2_000, maxAttempts: 3, retryBaseMs: 1_000, retryMaxMs: 10_000 },
    });
    const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    const secret = (await tc.core.webhooks.put(OPERATOR, org.id, { url, events: ['api_key.expiring'] })).newSecret!;
    const expiresAt = new Date(tc.clock.now().getTime() + 2 * DAY);
    const issued = await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'billing', expires_at: expiresAt.toISOString() });

    expect(await tc.core.expiryNotices.scanOnce()).to.deep.equal({ claimed: 1, enqueued: 1 });
    statuses.push(503);
    const delivery = tc.core.webhookDelivery!;
    await delivery.deliverDue();
    expect(received, 'the first attempt, answered 503').to.have.length(1);
    const [pending] = await tc.store.stores.outbox.list({ status: 'pending' }, { after: null, limit: 10 });
    expect(pending?.attempts).to.equal(1);
    tc.clock.set(pending!.nextAttemptAt);
    await delivery.deliverDue();
    expect(received).to.have.length(2);
    expect(received[1]!.headers['webhook-id'], 'the same message id on every attempt').to.equal(received[0]!.headers['webhook-id']);

    const verified = new Webhook(secret).verify(received[1]!.body, received[1]!.headers as Record<string, string>) as { type: string; data: Record<string, unknown> };
    expect(verified.type).to.equal('api_key.expiring');
    expect(verified.data).to.deep.equal({ organisation_id: org.id, key_id: issued.key.id, key_prefix: issued.key.keyPrefix, label: 'billing', expires_at: expiresAt.toISOString() });
    expect(received[1]!.body).not.to.include(issued.rawKey);
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(received[1]!.body, received[1]!.headers as Record<string, string>)).to.throw();
    const [delivered] = await tc.store.stores.outbox.list({}, { after: null, limit: 10 });
    expect(delivered?.status).to.equal('delivered');

    tc.clock.advance(60_000);
    expect(await tc.core.expiryNotices.scanOnce(), 'once per key').to.deep.equal({ claimed: 0, enqueued: 0 });
    expect(await delivery.deliverDue()).to.equal(0);
    expect(received).to.have.length(2);
  });
});
