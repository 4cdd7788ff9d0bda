/**
 * Signing secrets sealed at rest (WEBHOOK_SECRET_ENCRYPTION_KEY) end to end: the core seals the
 * secret in the in-memory store, WebhookDelivery opens it and createWebhookSender signs with it; a
 * REAL HTTP receiver verifies with `standardwebhooks` using the secret shown once. Covers rotation
 * of the key (previous keys, reencryptSecrets) and a secret under a key the sender lacks.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { OPERATOR, WebhookDelivery, WebhookSecretCipher, cryptoRandom, webhookSecretKeyId } from '@cos/core';
import { FakeClock, createInMemoryStore, createTestCore, type TestCore } from '@cos/core/testing';
import { createWebhookSender } from '@cos/webhook-sender';

interface Hook {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A real receiver on 127.0.0.1 that records every request and answers 204. */
/** Local receivers on http://127.0.0.1 are opted in explicitly (refused by default). */
const LOCAL_RECEIVERS = { webhookAllowHttp: true, webhookAllowPrivate: true };

async function startReceiver(): Promise<{ url: string; hooks: Hook[]; close(): Promise<void> }> {
  const hooks: Hook[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c));
    req.on('end', () => {
      hooks.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    hooks,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const KEY_A = new Uint8Array(randomBytes(32));
const KEY_B = new Uint8Array(randomBytes(32));

function deliveryWith(tc: TestCore, secrets: WebhookSecretCipher, maxAttempts = 3): WebhookDelivery {
  return new WebhookDelivery({
    stores: tc.store.stores,
    // Local receivers are opted in explicitly (loopback and http:// are refused by default).
    sender: createWebhookSender({ allowHttp: true, allowPrivate: true }),
    clock: tc.clock,
    random: cryptoRandom,
    logger: tc.logger,
    secrets,
    options: { timeoutMs: 2_000, maxAttempts, retryBaseMs: 1_000, batchSize: 10 },
  });
}

describe('webhook-sender: signing secrets sealed at rest (WEBHOOK_SECRET_ENCRYPTION_KEY)', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  beforeEach(async () => {
    receiver = await startReceiver();
  });
  afterEach(() => receiver.close());

  async function setup(secrets: WebhookSecretCipher): Promise<{ tc: TestCore; orgId: string; secret: string }> {
    const tc = createTestCore({ clock: new FakeClock(new Date()), store: createInMemoryStore(), webhookSecrets: secrets, config: LOCAL_RECEIVERS });
    const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    const secret = (await tc.core.webhooks.set(OPERATOR, org.id, receiver.url)).newSecret!;
    return { tc, orgId: org.id, secret };
  }

  const verify = (secret: string, hook: Hook): unknown => new Webhook(secret).verify(hook.body, hook.headers as Record<string, string>);

  it('C-59: the stored secret holds no whsec_, and the delivery is signed with the secret shown once', async () => {
    const cipher = new WebhookSecretCipher({ current: KEY_A });
    const { tc, orgId, secret } = await setup(cipher);
    expect((await tc.store.stores.webhooks.get(orgId))!.secret).not.to.include('whsec_');
    await tc.core.apiKeys.issue(OPERATOR, orgId, { label: 'ci' });
    expect(await deliveryWith(tc, cipher).deliverDue()).to.equal(1);
    expect(receiver.hooks).to.have.length(1);
    expect(verify(secret, receiver.hooks[0]!)).to.deep.include({ type: 'api_key.issued' });
  });

  it('C-59: rotating the key: with the old key as a previous key deliveries still verify; after reencryptSecrets the new key alone is enough', async () => {
    const { tc, orgId, secret } = await setup(new WebhookSecretCipher({ current: KEY_A }));
    const rotating = new WebhookSecretCipher({ current: KEY_B, previous: [KEY_A] });
    await tc.core.apiKeys.issue(OPERATOR, orgId, { label: 'one' });
    expect(await deliveryWith(tc, rotating).deliverDue()).to.equal(1);
    const rotatingCore = createTestCore({ clock: tc.clock, store: tc.store, webhookSecrets: rotating, config: LOCAL_RECEIVERS }).core;
    expect(await rotatingCore.webhooks.reencryptSecrets(OPERATOR)).to.deep.include({ reencrypted: 1, unchanged: 0, failed: [] });
    expect(new WebhookSecretCipher({ current: KEY_B }).keyIdOf((await tc.store.stores.webhooks.get(orgId))!.secret)).to.equal(webhookSecretKeyId(KEY_B));
    await tc.core.apiKeys.issue(OPERATOR, orgId, { label: 'two' });
    expect(await deliveryWith(tc, new WebhookSecretCipher({ current: KEY_B })).deliverDue()).to.equal(1);
    expect(receiver.hooks).to.have.length(2);
    for (const hook of receiver.hooks) expect(verify(secret, hook)).to.deep.include({ type: 'api_key.issued' });
  });

  it('C-59: a secret under a key the sender lacks: nothing is sent, the attempt fails with a clear last_error naming the key id, retries, then fails; no crash', async () => {
    const { tc, orgId } = await setup(new WebhookSecretCipher({ current: KEY_A }));
    await tc.core.apiKeys.issue(OPERATOR, orgId, { label: 'ci' });
    const delivery = deliveryWith(tc, new WebhookSecretCipher({ current: KEY_B }), 2);
    expect(await delivery.deliverDue()).to.equal(1);
    const [pending] = (await tc.store.stores.outbox.list({}, { after: null, limit: 10 }));
    const expected = `the webhook signing secret is encrypted under key ${webhookSecretKeyId(KEY_A)}, which is not configured (set WEBHOOK_SECRET_ENCRYPTION_KEY or WEBHOOK_SECRET_PREVIOUS_KEYS to that key)`;
    expect(pending).to.deep.include({ status: 'pending', attempts: 1, lastError: expected });
    tc.clock.set(pending!.nextAttemptAt);
    expect(await delivery.deliverDue()).to.equal(1);
    expect(await tc.store.stores.outbox.findById(pending!.id)).to.deep.include({ status: 'failed', attempts: 2, lastError: expected });
    expect(receiver.hooks).to.deep.equal([]);
    const warning = tc.logger.entries.find((e) => e.level === 'warn');
    expect(warning?.fields['error']).to.equal(expected);
    const stored = (await tc.store.stores.webhooks.get(orgId))!.secret;
    expect(JSON.stringify(tc.logger.entries)).not.to.include(stored.split(':')[4]!);
  });
});
