/**
 * Webhook signing secrets at rest on SQLite and Postgres: with WEBHOOK_SECRET_ENCRYPTION_KEY the
 * core seals every secret it writes, so no column of any table holds `whsec_` or the secret (read
 * straight from the database); reencryptSecrets moves rows under a new key through the store's
 * compare-and-set; webhook audit entries hold the endpoint's origin only.
 */
import { randomBytes } from 'node:crypto';
import { createCore, InProcessRateCounter, namedOperator, OPERATOR, WebhookSecretCipher, webhookSecretKeyId, type Core } from '@cos/core';
import type { SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import { forEachTarget, TABLES } from './support/targets.js';

const KEY_A = new Uint8Array(randomBytes(32));
const KEY_B = new Uint8Array(randomBytes(32));

function coreOver(store: SqlStore, webhookSecrets: WebhookSecretCipher): Core {
  return createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter: new InProcessRateCounter(), webhookSecrets });
}

/** Every cell of every table, as text. */
async function everything(store: SqlStore): Promise<string> {
  const parts: string[] = [];
  for (const t of TABLES) parts.push(JSON.stringify(await store.knex(t).select('*')));
  return parts.join('\n');
}

async function storedSecrets(store: SqlStore): Promise<Map<string, string>> {
  const rows = (await store.knex('webhook_endpoints').select('organisation_id', 'secret')) as Array<{ organisation_id: string; secret: string }>;
  return new Map(rows.map((r) => [r.organisation_id, r.secret]));
}

forEachTarget('webhook secrets at rest', (target) => {
  let store: SqlStore;
  beforeEach(async () => {
    store = await target.open();
  });
  afterEach(() => store.close());

  it('C-59: with a key, no column of any table holds whsec_ or a secret after set, rotate-secret and deliveries queued; the rows open to the secrets shown once', async () => {
    const cipher = new WebhookSecretCipher({ current: KEY_A });
    const core = coreOver(store, cipher);
    const shown = new Map<string, string>();
    for (let i = 0; i < 3; i += 1) {
      const org = await core.organisations.create(OPERATOR, { name: `Org ${i}`, slug: `org-${i}` });
      shown.set(org.id, (await core.webhooks.set(OPERATOR, org.id, `https://hooks${i}.example/cos`)).newSecret!);
      await core.apiKeys.issue(OPERATOR, org.id, { label: 'ci' });
      if (i === 1) shown.set(org.id, (await core.webhooks.rotateSecret(OPERATOR, org.id)).newSecret!);
    }
    const dump = await everything(store);
    expect(dump).not.to.include('whsec_');
    for (const secret of shown.values()) expect(dump).not.to.include(secret.slice(6)).and.not.to.include(Buffer.from(secret.slice(6), 'base64').toString('hex'));
    const stored = await storedSecrets(store);
    for (const [orgId, secret] of shown) {
      expect(stored.get(orgId)).to.match(new RegExp(`^whenc:v1:${webhookSecretKeyId(KEY_A)}:`));
      expect(cipher.open(orgId, stored.get(orgId)!)).to.equal(secret);
    }
  });

  it('C-59: reencryptSecrets encrypts rows stored in clear and moves rows under a previous key to the current one (read back from the database)', async () => {
    const plainCore = coreOver(store, new WebhookSecretCipher());
    const a = await plainCore.organisations.create(OPERATOR, { name: 'Plain', slug: 'plain' });
    const plainSecret = (await plainCore.webhooks.set(OPERATOR, a.id, 'https://plain.example/h')).newSecret!;
    const b = await plainCore.organisations.create(OPERATOR, { name: 'Old key', slug: 'old-key' });
    const oldSecret = (await coreOver(store, new WebhookSecretCipher({ current: KEY_A })).webhooks.set(OPERATOR, b.id, 'https://old.example/h')).newSecret!;
    expect((await storedSecrets(store)).get(a.id), 'written before a key was set: in clear').to.equal(plainSecret);

    const rotating = coreOver(store, new WebhookSecretCipher({ current: KEY_B, previous: [KEY_A] }));
    expect(await rotating.webhooks.reencryptSecrets(OPERATOR)).to.deep.equal({
      keyId: webhookSecretKeyId(KEY_B),
      examined: 2,
      reencrypted: 2,
      unchanged: 0,
      skipped: 0,
      failed: [],
    });
    expect(await everything(store)).not.to.include('whsec_');
    const onlyB = new WebhookSecretCipher({ current: KEY_B });
    const stored = await storedSecrets(store);
    expect(onlyB.open(a.id, stored.get(a.id)!)).to.equal(plainSecret);
    expect(onlyB.open(b.id, stored.get(b.id)!)).to.equal(oldSecret);
    expect(await rotating.webhooks.reencryptSecrets(OPERATOR)).to.deep.include({ reencrypted: 0, unchanged: 2 });
  });

  it('C-40: webhook changes and a retry are audited with the named operator; the table holds the origin, never the path, query or secret', async () => {
    const core = coreOver(store, new WebhookSecretCipher({ current: KEY_A }));
    const alice = namedOperator('alice');
    const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    const set = await core.webhooks.set(alice, org.id, 'https://hooks.acme.example/services/T0/B0/PATHTOKEN?sig=QUERYTOKEN');
    const rotated = await core.webhooks.rotateSecret(alice, org.id);
    await core.apiKeys.issue(OPERATOR, org.id, { label: 'ci' });
    const [n] = await store.stores.outbox.claimDue(new Date(), new Date(Date.now() + 60_000), 1, 'c');
    await store.stores.outbox.complete(n!.id, 'c', { status: 'failed', at: new Date(), error: 'answered 500' });
    await core.notifications.retry(alice, n!.id);
    await core.webhooks.remove(alice, org.id);
    const rows = (await store.knex('audit_entries').select('kind', 'actor_type', 'actor_name', 'webhook_origin', 'notification_id', 'notification_type').where('actor_name', 'alice')) as Array<Record<string, unknown>>;
    expect(rows.map((r) => [r.kind, r.actor_type, r.webhook_origin, r.notification_id, r.notification_type])).to.have.deep.members([
      ['webhook_endpoint_set', 'operator', 'https://hooks.acme.example', null, null],
      ['webhook_secret_rotated', 'operator', 'https://hooks.acme.example', null, null],
      ['notification_retried', 'operator', null, n!.id, 'api_key.issued'],
      ['webhook_endpoint_removed', 'operator', 'https://hooks.acme.example', null, null],
    ]);
    const audit = JSON.stringify(await store.knex('audit_entries').select('*'));
    for (const text of ['PATHTOKEN', 'QUERYTOKEN', 'whsec_', set.newSecret!.slice(6), rotated.newSecret!.slice(6)]) expect(audit).not.to.include(text);
  });
});
