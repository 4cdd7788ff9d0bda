/** Contract suite of WebhookStore: each organisation's one optional endpoint (C-59). */
import { expect } from 'chai';
import { fullEndpoint, type WebhookEndpoint } from '../../domain/webhook.js';
import type { StoreHarnessFactory } from '../harness.js';
import { at, eachWithTwoOrganisations, expectSameInstant, newOrganisation, newWebhookEndpoint } from './fixtures.js';

export function expectWebhookEndpoint(actual: WebhookEndpoint | undefined | null, expected: WebhookEndpoint): void {
  expect(actual, `webhook of ${expected.organisationId}`).to.not.equal(undefined);
  expect(actual, `webhook of ${expected.organisationId}`).to.not.equal(null);
  const w = actual as WebhookEndpoint;
  expect(w.organisationId).to.equal(expected.organisationId);
  expect(w.url).to.equal(expected.url);
  expect(w.secret).to.equal(expected.secret);
  expectSameInstant(w.createdAt, expected.createdAt, 'createdAt');
  expectSameInstant(w.updatedAt, expected.updatedAt, 'updatedAt');
  const want = fullEndpoint(expected);
  expect(w.events).to.deep.equal(want.events);
  expect(w.enabled).to.equal(want.enabled);
  expect(w.previousSecret).to.equal(want.previousSecret);
  if (want.previousSecretExpiresAt === null) expect(w.previousSecretExpiresAt).to.equal(null);
  else expectSameInstant(w.previousSecretExpiresAt, want.previousSecretExpiresAt, 'previousSecretExpiresAt');
  expect(Object.keys(w).sort()).to.deep.equal(
    ['createdAt', 'enabled', 'events', 'organisationId', 'previousSecret', 'previousSecretExpiresAt', 'secret', 'updatedAt', 'url'],
    'no other fields',
  );
}

export function describeWebhookStore(name: string, factory: StoreHarnessFactory): void {
  describe(`WebhookStore contract: ${name}`, () => {
    const current = eachWithTwoOrganisations(factory);
    const webhooks = () => current().harness.stores.webhooks;
    const orgA = (): string => current().orgA.id;
    const orgB = (): string => current().orgB.id;

    it('C-59: an organisation without an endpoint gets null', async () => {
      expect(await webhooks().get(orgA())).to.equal(null);
      expect(await webhooks().get('3f2504e0-4f89-41d3-9a0c-0305e82c3301')).to.equal(null);
    });

    it('C-59: put then get round-trips every field, timestamps at ms precision', async () => {
      const w = newWebhookEndpoint(orgA(), { createdAt: at(7), updatedAt: at(8), url: 'https://hooks.example.com/a?b=c&d=ł' });
      await webhooks().put(w);
      expectWebhookEndpoint(await webhooks().get(orgA()), w);
    });

    it('events, enabled and the previous secret with the end of its overlap round-trip (absent: every event, enabled, none)', async () => {
      const w = newWebhookEndpoint(orgA(), {
        events: ['api_key.exposed', 'api_key.revoked'],
        enabled: false,
        previousSecret: 'whsec_cHJldmlvdXMgc2VjcmV0IG9mIDMyIGJ5dGVzIQ==',
        previousSecretExpiresAt: at(86_400_000),
      });
      await webhooks().put(w);
      expectWebhookEndpoint(await webhooks().get(orgA()), w);
      const all = newWebhookEndpoint(orgB());
      await webhooks().put(all);
      const stored = await webhooks().get(orgB());
      expect(stored).to.deep.include({ events: ['*'], enabled: true, previousSecret: null, previousSecretExpiresAt: null });
      await webhooks().put({ ...w, events: ['*'], enabled: true, previousSecret: null, previousSecretExpiresAt: null });
      expect(await webhooks().get(orgA())).to.deep.include({ events: ['*'], enabled: true, previousSecret: null, previousSecretExpiresAt: null });
    });

    it('C-59: a second put replaces the endpoint (at most one per organisation)', async () => {
      await webhooks().put(newWebhookEndpoint(orgA(), { createdAt: at(1), updatedAt: at(1) }));
      const replacement = newWebhookEndpoint(orgA(), { createdAt: at(1), updatedAt: at(2_000) });
      await webhooks().put(replacement);
      expectWebhookEndpoint(await webhooks().get(orgA()), replacement);
    });

    it('C-59: remove is true when there was an endpoint, then false; get is null after it', async () => {
      await webhooks().put(newWebhookEndpoint(orgA()));
      expect(await webhooks().remove(orgA())).to.equal(true);
      expect(await webhooks().get(orgA())).to.equal(null);
      expect(await webhooks().remove(orgA())).to.equal(false);
      expect(await webhooks().remove(orgB()), 'an organisation that never had one').to.equal(false);
    });

    it('C-59: endpoints are per organisation: putting, replacing or removing one leaves the other', async () => {
      const a = newWebhookEndpoint(orgA(), { createdAt: at(1), updatedAt: at(2) });
      const b = newWebhookEndpoint(orgB(), { createdAt: at(3), updatedAt: at(4) });
      await webhooks().put(a);
      await webhooks().put(b);
      expectWebhookEndpoint(await webhooks().get(orgA()), a);
      expectWebhookEndpoint(await webhooks().get(orgB()), b);
      await webhooks().put({ ...a, url: 'https://hooks.example.com/new', updatedAt: at(5) });
      expectWebhookEndpoint(await webhooks().get(orgB()), b);
      expect(await webhooks().remove(orgA())).to.equal(true);
      expectWebhookEndpoint(await webhooks().get(orgB()), b);
    });

    it('C-59: listAfter pages every endpoint by organisation id (byte order), strictly after the given id, at most limit', async () => {
      const ids = [orgA(), orgB()].sort();
      const third = newOrganisation();
      await current().harness.stores.organisations.create(third);
      const all = [...ids, third.id].sort();
      expect(await webhooks().listAfter(null, 10), 'no endpoint yet').to.deep.equal([]);
      const put = all.map((id, i) => newWebhookEndpoint(id, { createdAt: at(10 - i), updatedAt: at(20 - i) }));
      for (const w of [...put].reverse()) await webhooks().put(w);
      const first = await webhooks().listAfter(null, 2);
      expect(first.map((w) => w.organisationId)).to.deep.equal(all.slice(0, 2));
      first.forEach((w, i) => expectWebhookEndpoint(w, put[i]!));
      const rest = await webhooks().listAfter(first[1]!.organisationId, 2);
      expect(rest.map((w) => w.organisationId)).to.deep.equal(all.slice(2));
      expectWebhookEndpoint(rest[0], put[2]!);
      expect(await webhooks().listAfter(all[2]!, 2)).to.deep.equal([]);
      expect(await webhooks().listAfter(null, 0)).to.deep.equal([]);
    });

    it('C-59: replaceSecret swaps the secret only while it is still the expected one, leaving every other field', async () => {
      const w = newWebhookEndpoint(orgA(), { createdAt: at(1), updatedAt: at(2) });
      const b = newWebhookEndpoint(orgB(), { createdAt: at(3), updatedAt: at(4) });
      await webhooks().put(w);
      await webhooks().put(b);
      expect(await webhooks().replaceSecret(orgA(), 'whsec_not-the-stored-one', 'whenc:v1:x')).to.equal(false);
      expectWebhookEndpoint(await webhooks().get(orgA()), w);
      expect(await webhooks().replaceSecret(orgA(), w.secret, 'whenc:v1:sealed')).to.equal(true);
      expectWebhookEndpoint(await webhooks().get(orgA()), { ...w, secret: 'whenc:v1:sealed' });
      expect(await webhooks().replaceSecret(orgA(), w.secret, 'whenc:v1:again'), 'the old value is no longer there').to.equal(false);
      expectWebhookEndpoint(await webhooks().get(orgB()), b);
      expect(await webhooks().remove(orgB())).to.equal(true);
      expect(await webhooks().replaceSecret(orgB(), b.secret, 'whenc:v1:gone'), 'no endpoint').to.equal(false);
      expect(await webhooks().get(orgB())).to.equal(null);
    });

    it('returns copies: mutating a returned endpoint or the input changes nothing stored', async () => {
      const input = newWebhookEndpoint(orgA(), { createdAt: at(1), updatedAt: at(2) });
      const original = { ...input, createdAt: new Date(input.createdAt), updatedAt: new Date(input.updatedAt) };
      await webhooks().put(input);
      (input as { url: string }).url = 'https://mutated.example.com';
      input.updatedAt.setTime(0);
      const found = await webhooks().get(orgA());
      expectWebhookEndpoint(found, original);
      found!.createdAt.setTime(0);
      expectWebhookEndpoint(await webhooks().get(orgA()), original);
    });
  });
}
