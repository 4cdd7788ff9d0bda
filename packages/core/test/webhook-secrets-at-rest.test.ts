/**
 * Webhook signing secrets at rest (WEBHOOK_SECRET_ENCRYPTION_KEY): the cipher's stored form, key ids
 * and failures, and the use cases that seal on write and move stored secrets under the current key
 * (`reencryptSecrets`), on the real in-memory store.
 */
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import {
  createCore,
  OPERATOR,
  parseWebhookSecretKey,
  PLAINTEXT_WEBHOOK_SECRETS,
  SEALED_WEBHOOK_SECRET_PREFIX,
  WebhookSecretCipher,
  webhookSecretKeyId,
  WebhookSecretUnreadableError,
  cryptoRandom,
  type WebhookStore,
} from '@cos/core';
import { FakeClock, InMemoryRateCounter, createInMemoryStore } from '@cos/core/testing';
import { fixture, withStore } from './use-cases-fixtures.js';
import { storePorts } from '@cos/core/testing/contracts';

const KEY_A = new Uint8Array(randomBytes(32));
const KEY_B = new Uint8Array(randomBytes(32));
const ORG = '0a1b2c3d-0000-4000-8000-000000000001';
const OTHER_ORG = '0a1b2c3d-0000-4000-8000-000000000002';
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

function unreadable(call: () => unknown): WebhookSecretUnreadableError {
  try {
    call();
  } catch (e) {
    expect(e).to.be.instanceOf(WebhookSecretUnreadableError);
    return e as WebhookSecretUnreadableError;
  }
  expect.fail('expected WebhookSecretUnreadableError');
}

describe('webhook secrets at rest: the cipher (WEBHOOK_SECRET_ENCRYPTION_KEY)', () => {
  it('a key is 64 hex digits or base64 / base64url of 32 bytes; anything else is refused without repeating it', () => {
    const bytes = Buffer.from(KEY_A);
    for (const text of [bytes.toString('hex'), bytes.toString('hex').toUpperCase(), bytes.toString('base64'), bytes.toString('base64url'), ` ${bytes.toString('base64')}\n`]) {
      expect(Buffer.from(parseWebhookSecretKey(text)).equals(bytes), text).to.equal(true);
    }
    const bad = [
      randomBytes(31).toString('hex'),
      randomBytes(33).toString('hex'),
      randomBytes(31).toString('base64'),
      randomBytes(33).toString('base64'),
      `${bytes.toString('hex').slice(0, 63)}g`,
      'correct horse battery staple',
      '',
    ];
    for (const text of bad) {
      let message = '';
      try {
        parseWebhookSecretKey(text);
      } catch (e) {
        message = (e as Error).message;
      }
      expect(message, `refused: ${text}`).to.match(/^must be 32 bytes written as 64 hex digits or as base64/);
      if (text.length > 0) expect(message).not.to.include(text);
    }
  });

  it('the key id is the first 12 hex digits of SHA-256 over the key bytes', () => {
    expect(webhookSecretKeyId(KEY_A)).to.equal(createHash('sha256').update(KEY_A).digest('hex').slice(0, 12));
    expect(new WebhookSecretCipher({ current: KEY_A }).currentKeyId).to.equal(webhookSecretKeyId(KEY_A));
    expect(PLAINTEXT_WEBHOOK_SECRETS.currentKeyId).to.equal(null);
  });

  it('sealing stores `whenc:v1:<key id>:…` holding neither the secret nor `whsec_`, opens to the secret, and differs each time (random IV)', () => {
    const cipher = new WebhookSecretCipher({ current: KEY_A });
    const sealed = cipher.seal(ORG, SECRET, cryptoRandom);
    expect(sealed.startsWith(`${SEALED_WEBHOOK_SECRET_PREFIX}${webhookSecretKeyId(KEY_A)}:`)).to.equal(true);
    expect(sealed).not.to.include('whsec_').and.not.to.include(SECRET.slice(6)).and.not.to.include(Buffer.from(KEY_A).toString('base64'));
    expect(cipher.open(ORG, sealed)).to.equal(SECRET);
    expect(cipher.seal(ORG, SECRET, cryptoRandom)).not.to.equal(sealed);
    expect(cipher.keyIdOf(sealed)).to.equal(webhookSecretKeyId(KEY_A));
    expect(cipher.isCurrent(sealed)).to.equal(true);
    expect(cipher.isCurrent(SECRET), 'plaintext is not current once a key is set').to.equal(false);
  });

  it('without a key secrets stay in clear; a plaintext `whsec_` always opens as itself (rows written before the key)', () => {
    expect(PLAINTEXT_WEBHOOK_SECRETS.seal(ORG, SECRET, cryptoRandom)).to.equal(SECRET);
    expect(PLAINTEXT_WEBHOOK_SECRETS.isCurrent(SECRET)).to.equal(true);
    expect(new WebhookSecretCipher({ current: KEY_A }).open(ORG, SECRET)).to.equal(SECRET);
  });

  it('a secret sealed under a key that is not configured is a clear error naming the key id, never the stored value', () => {
    const sealed = new WebhookSecretCipher({ current: KEY_A }).seal(ORG, SECRET, cryptoRandom);
    for (const cipher of [new WebhookSecretCipher({ current: KEY_B }), PLAINTEXT_WEBHOOK_SECRETS]) {
      const e = unreadable(() => cipher.open(ORG, sealed));
      expect(e.keyId).to.equal(webhookSecretKeyId(KEY_A));
      expect(e.message).to.equal(
        `the webhook signing secret is encrypted under key ${webhookSecretKeyId(KEY_A)}, which is not configured (set WEBHOOK_SECRET_ENCRYPTION_KEY or WEBHOOK_SECRET_PREVIOUS_KEYS to that key)`,
      );
      expect(e.message).not.to.include(sealed.split(':')[3]!);
    }
  });

  it('a previous key opens what it sealed; the current key seals; isCurrent tells them apart', () => {
    const old = new WebhookSecretCipher({ current: KEY_A });
    const sealedOld = old.seal(ORG, SECRET, cryptoRandom);
    const rotated = new WebhookSecretCipher({ current: KEY_B, previous: [KEY_A] });
    expect(rotated.open(ORG, sealedOld)).to.equal(SECRET);
    expect(rotated.isCurrent(sealedOld)).to.equal(false);
    expect(rotated.keyIds).to.deep.equal([webhookSecretKeyId(KEY_B), webhookSecretKeyId(KEY_A)]);
    const sealedNew = rotated.seal(ORG, SECRET, cryptoRandom);
    expect(rotated.keyIdOf(sealedNew)).to.equal(webhookSecretKeyId(KEY_B));
    expect(rotated.isCurrent(sealedNew)).to.equal(true);
  });

  it('a sealed secret moved to another organisation, or altered in any piece, does not open', () => {
    const cipher = new WebhookSecretCipher({ current: KEY_A });
    const sealed = cipher.seal(ORG, SECRET, cryptoRandom);
    expect(unreadable(() => cipher.open(OTHER_ORG, sealed)).message).to.match(/does not decrypt under key [0-9a-f]{12} \(the stored value was altered or belongs to another organisation\)$/);
    const parts = sealed.split(':');
    for (const i of [3, 4, 5]) {
      const altered = [...parts];
      const bytes = Buffer.from(altered[i]!, 'base64url');
      bytes[0] = bytes[0]! ^ 1;
      altered[i] = bytes.toString('base64url');
      expect(() => cipher.open(ORG, altered.join(':')), `piece ${i}`).to.throw(WebhookSecretUnreadableError, /does not decrypt/);
    }
    for (const junk of ['', 'secret', 'whenc:v1:abc', `whenc:v1:${parts[2]}:x`, 'whenc:v2:0123456789ab:a:b:c']) {
      expect(() => cipher.open(ORG, junk), junk).to.throw(WebhookSecretUnreadableError, /in no known form|does not decrypt/);
    }
  });
});

describe('webhook secrets at rest: the use cases on the in-memory store', () => {
  const storedSecret = async (stores: { webhooks: WebhookStore }, orgId: string): Promise<string> => (await stores.webhooks.get(orgId))!.secret;

  it('C-59: with a key, set and rotate-secret store the secret sealed (no whsec_ in the row) and it opens to the secret shown once; a URL change keeps the row', async () => {
    const cipher = new WebhookSecretCipher({ current: KEY_A });
    const f = fixture({ webhookSecrets: cipher });
    const org = await f.org('acme');
    const set = await f.core.webhooks.set(OPERATOR, org.id, 'https://hooks.acme.example/cos');
    expect(set.newSecret).to.match(/^whsec_/);
    const stored = await storedSecret(f.store.stores, org.id);
    expect(stored).to.match(/^whenc:v1:[0-9a-f]{12}:/).and.not.to.include('whsec_');
    expect(cipher.open(org.id, stored)).to.equal(set.newSecret);
    await f.core.webhooks.set(OPERATOR, org.id, 'https://hooks.acme.example/v2');
    expect(await storedSecret(f.store.stores, org.id)).to.equal(stored);
    const rotated = await f.core.webhooks.rotateSecret(OPERATOR, org.id);
    const storedRotated = await storedSecret(f.store.stores, org.id);
    expect(storedRotated).not.to.include('whsec_').and.not.to.equal(stored);
    expect(cipher.open(org.id, storedRotated)).to.equal(rotated.newSecret);
  });

  it('reencryptSecrets moves plaintext rows and rows under a previous key under the current key, keeps current ones, reports rows under an unknown key and changes nothing of them', async () => {
    const store = createInMemoryStore();
    const clock = new FakeClock();
    const coreWith = (webhookSecrets: WebhookSecretCipher) =>
      createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter: new InMemoryRateCounter(clock), clock, webhookSecrets });
    const plain = coreWith(PLAINTEXT_WEBHOOK_SECRETS);
    const underA = coreWith(new WebhookSecretCipher({ current: KEY_A }));
    const unknownKey = new Uint8Array(randomBytes(32));
    const underUnknown = coreWith(new WebhookSecretCipher({ current: unknownKey }));
    const rotated = new WebhookSecretCipher({ current: KEY_B, previous: [KEY_A] });
    const now = coreWith(rotated);
    const secrets = new Map<string, string>();
    const orgs: string[] = [];
    for (const [i, core] of [plain, underA, underUnknown, now].entries()) {
      const org = await plain.organisations.create(OPERATOR, { name: `Org ${i}`, slug: `org-${i}` });
      orgs.push(org.id);
      secrets.set(org.id, (await core.webhooks.set(OPERATOR, org.id, `https://hooks${i}.example/cos`)).newSecret!);
    }
    const [plainOrg, aOrg, unknownOrg, currentOrg] = orgs as [string, string, string, string];
    const before = new Map(await Promise.all(orgs.map(async (id) => [id, await storedSecret(store.stores, id)] as const)));
    expect(before.get(plainOrg)).to.equal(secrets.get(plainOrg));

    const report = await now.webhooks.reencryptSecrets(OPERATOR);
    expect(report).to.deep.equal({
      keyId: webhookSecretKeyId(KEY_B),
      examined: 4,
      reencrypted: 2,
      unchanged: 1,
      skipped: 0,
      failed: [{ organisationId: unknownOrg, error: `the webhook signing secret is encrypted under key ${webhookSecretKeyId(unknownKey)}, which is not configured (set WEBHOOK_SECRET_ENCRYPTION_KEY or WEBHOOK_SECRET_PREVIOUS_KEYS to that key)` }],
    });
    const onlyB = new WebhookSecretCipher({ current: KEY_B });
    for (const id of [plainOrg, aOrg, currentOrg]) {
      const stored = await storedSecret(store.stores, id);
      expect(stored, id).not.to.include('whsec_');
      expect(onlyB.keyIdOf(stored)).to.equal(webhookSecretKeyId(KEY_B));
      expect(onlyB.open(id, stored), 'the signing secret itself is unchanged').to.equal(secrets.get(id));
    }
    expect(await storedSecret(store.stores, currentOrg), 'a current row is not rewritten').to.equal(before.get(currentOrg));
    expect(await storedSecret(store.stores, unknownOrg), 'an unreadable row is left as it is').to.equal(before.get(unknownOrg));
    const again = await now.webhooks.reencryptSecrets(OPERATOR);
    expect(again).to.deep.include({ examined: 4, reencrypted: 0, unchanged: 3, skipped: 0 });
    expect(again.failed.map((x) => x.organisationId)).to.deep.equal([unknownOrg]);

    // Encryption turned off: with only previous keys, the secrets go back to plaintext.
    const off = coreWith(new WebhookSecretCipher({ previous: [KEY_B] }));
    const decrypted = await off.webhooks.reencryptSecrets(OPERATOR);
    expect(decrypted).to.deep.include({ keyId: null, examined: 4, reencrypted: 3, unchanged: 0 });
    expect(await storedSecret(store.stores, aOrg)).to.equal(secrets.get(aOrg));
  });

  it('reencryptSecrets never overwrites a rotation committed while it runs (compare and set): that row is skipped and keeps the new secret', async () => {
    const store = createInMemoryStore();
    const clock = new FakeClock();
    const cipher = new WebhookSecretCipher({ current: KEY_A });
    const base = { unitOfWork: store.unitOfWork, health: store.health, counter: new InMemoryRateCounter(clock), clock, webhookSecrets: cipher };
    const plain = createCore({ ...base, stores: store.stores, webhookSecrets: PLAINTEXT_WEBHOOK_SECRETS });
    const org = await plain.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    await plain.webhooks.set(OPERATOR, org.id, 'https://hooks.acme.example/cos');
    const other = createCore({ ...base, stores: store.stores });
    let rotatedSecret: string | null = null;
    const racing: WebhookStore = {
      get: (id) => store.stores.webhooks.get(id),
      put: (w) => store.stores.webhooks.put(w),
      remove: (id) => store.stores.webhooks.remove(id),
      replaceSecret: (id, expected, next) => store.stores.webhooks.replaceSecret(id, expected, next),
      listAfter: async (after, limit) => {
        const page = await store.stores.webhooks.listAfter(after, limit);
        if (rotatedSecret === null) rotatedSecret = (await other.webhooks.rotateSecret(OPERATOR, org.id)).newSecret;
        return page;
      },
    };
    const core = createCore({ ...base, stores: withStore(storePorts(store), 'webhooks', racing) });
    const report = await core.webhooks.reencryptSecrets(OPERATOR);
    expect(report).to.deep.include({ examined: 1, reencrypted: 0, unchanged: 0, skipped: 1 });
    expect(cipher.open(org.id, (await store.stores.webhooks.get(org.id))!.secret)).to.equal(rotatedSecret);
  });
});
