/**
 * Self-service through the real core on every store (in-memory, SQLite file and :memory:, Postgres):
 * who am I (the calling key and its organisation) and the `cause` every webhook event carries.
 * The same over HTTP: system-tests/contract/self-service.test.ts.
 */
import { expect } from 'chai';
import { NotFoundError, OPERATOR, namedOperator, type Core, type KeyPrincipal } from '@cos/core';
import { createInMemoryStore, createTestCore, type StoreHarness } from '@cos/core/testing';
import { forEachTarget } from './support/targets.js';

const HOOK = 'https://receiver.example/hook';
const PAGE = { limit: 100, after: null } as const;

function describeSelfService(name: string, open: () => Promise<StoreHarness>): void {
  describe(`self-service, who am I and the events' cause (C-56) on ${name}`, () => {
    let store: StoreHarness;
    let core: Core;
    let orgId: string;
    let caller: KeyPrincipal;
    beforeEach(async () => {
      store = await open();
      core = createTestCore({ store }).core;
      const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: `acme-${Math.random().toString(36).slice(2, 10)}` });
      orgId = org.id;
      const own = await core.apiKeys.issue(OPERATOR, orgId, { label: 'caller' });
      caller = await core.authenticator.authenticate(`Bearer ${own.rawKey}`);
      await core.webhooks.set(OPERATOR, orgId, HOOK);
    });
    afterEach(async () => {
      await core.keyUsage.stop();
      await store.close();
    });

    const events = async (keyId: string): Promise<Array<{ type: string; data: Record<string, unknown> }>> =>
      (await store.stores.outbox.list({ organisationId: orgId }, PAGE))
        .map((n) => JSON.parse(n.payload) as { type: string; data: Record<string, unknown> })
        .filter((p) => p.data['key_id'] === keyId);

    it('whoAmI answers the calling key and its organisation as stored', async () => {
      const me = await core.apiKeys.whoAmI(caller);
      expect(me.key).to.deep.include({ id: caller.keyId, organisationId: orgId, label: 'caller' });
      expect(me.organisation).to.deep.include({ id: orgId, name: 'Acme' });
      const gone = { ...caller, keyId: '3f1c9a52-8d4e-4b7a-9c21-5e6f7a8b9c0d' };
      expect(await core.apiKeys.whoAmI(gone).catch((e: unknown) => e)).to.be.instanceOf(NotFoundError);
    });

    it('cause: a key over HTTP is {type: api_key, key_id}, the operator {type: operator} (never its name)', async () => {
      const byKey = await core.apiKeys.issue(caller, orgId, { label: 'by key' });
      await core.apiKeys.revoke(namedOperator('ada'), orgId, byKey.key.id);
      const sent = await events(byKey.key.id);
      expect(sent.map((e) => [e.type, e.data['cause']])).to.have.deep.members([
        ['api_key.issued', { type: 'api_key', key_id: caller.keyId }],
        ['api_key.revoked', { type: 'operator' }],
      ]);
    });

    it('cause: a roll is the caller\'s; the old key\'s revocation by a roll with grace 0 is {type: roll, new_key_id}', async () => {
      const old = await core.apiKeys.issue(OPERATOR, orgId, { label: 'old' });
      const rolled = await core.apiKeys.roll(caller, orgId, old.key.id, { grace_period_seconds: 0 });
      const sent = await events(old.key.id);
      const causeOf = (type: string): unknown => sent.find((e) => e.type === type)?.data['cause'];
      expect(causeOf('api_key.rolled')).to.deep.equal({ type: 'api_key', key_id: caller.keyId });
      expect(causeOf('api_key.revoked')).to.deep.equal({ type: 'roll', new_key_id: rolled.key.id });
    });

    it('cause: a key found in public is {type: secret_scanning} on both the exposed and the revoked event', async () => {
      const leaked = await core.apiKeys.issue(OPERATOR, orgId, { label: 'leaked' });
      await core.secretScanning.report([{ token: leaked.rawKey, type: 'cos_api_key', url: 'https://github.com/x/y/blob/main/a', source: 'content' }]);
      const sent = await events(leaked.key.id);
      const causes = sent.filter((e) => e.type !== 'api_key.issued').map((e) => [e.type, e.data['cause']]);
      expect(causes).to.have.deep.members([
        ['api_key.exposed', { type: 'secret_scanning' }],
        ['api_key.revoked', { type: 'secret_scanning' }],
      ]);
    });
  });
}

describeSelfService('the in-memory store', async () => createInMemoryStore());

forEachTarget('self-service', (target) => {
  describeSelfService(target.name, () => target.open());
});
