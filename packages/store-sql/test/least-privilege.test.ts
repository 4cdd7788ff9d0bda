/**
 * Scoped keys, lineage and key policies (C-60..C-62) through the real core on every store
 * (in-memory, SQLite file and :memory:, Postgres), with a FakeClock: scopes held and refused,
 * escalation, self-revocation, lineage through issue and roll, the exposure response revoking
 * descendants in one unit of work, the key policy applied and audited, and a failure inside the
 * exposure's unit of work leaving nothing behind. Store semantics alone are in the contract suites.
 */
import { expect } from 'chai';
import {
  ALL_BUILTIN_SCOPES,
  entryHash,
  ForbiddenError,
  GENESIS_HASH,
  OPERATOR,
  SCOPE_ESCALATION_MESSAGE,
  UnauthorizedError,
  ValidationError,
  type Core,
  type KeyPrincipal,
  type Stores,
} from '@cos/core';
import { createInMemoryStore, createTestCore, type StoreHarness, type TestCore } from '@cos/core/testing';
import { forEachTarget } from './support/targets.js';
import { rejection } from '@cos/test-support/rejection';

const PAGE = { limit: 1000, after: null } as const;
const STRICT = { max_lifetime_seconds: 86_400, allowed_environments: ['live'], exposure_response: 'revoke_key_and_descendants' };

interface Fixture {
  tc: TestCore;
  core: Core;
  orgId: string;
  platform: KeyPrincipal;
  /** A key of the organisation with every scope, as a principal. */
  owner: KeyPrincipal;
  ownerRaw: string;
}

async function fixture(store: StoreHarness): Promise<Fixture> {
  const tc = createTestCore({ store });
  const { core } = tc;
  const suffix = Math.random().toString(36).slice(2, 10);
  const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: `acme-${suffix}` });
  const system = await core.organisations.create(OPERATOR, { name: 'Platform', slug: `platform-${suffix}` }, { isSystem: true });
  const own = await core.apiKeys.issue(OPERATOR, org.id, { label: 'owner' });
  const platformKey = await core.apiKeys.issue(OPERATOR, system.id, { label: 'platform' });
  return {
    tc,
    core,
    orgId: org.id,
    owner: await core.authenticator.authenticate(`Bearer ${own.rawKey}`),
    ownerRaw: own.rawKey,
    platform: await core.authenticator.authenticate(`Bearer ${platformKey.rawKey}`),
  };
}

function describeLeastPrivilege(name: string, open: () => Promise<StoreHarness>): void {
  describe(`least privilege (C-60..C-62) on ${name}`, () => {
    let store: StoreHarness;
    let f: Fixture;
    beforeEach(async () => {
      store = await open();
      f = await fixture(store);
    });
    afterEach(async () => {
      await f.core.keyUsage.stop();
      await store.close();
    });

    /** A key of the organisation issued by `by`, authenticated: its principal and raw key. */
    async function issueAs(by: KeyPrincipal | typeof OPERATOR, body: Record<string, unknown>): Promise<{ principal: KeyPrincipal; raw: string; id: string }> {
      const issued = await f.core.apiKeys.issue(by, f.orgId, { label: 'k', ...body });
      return { principal: await f.core.authenticator.authenticate(`Bearer ${issued.rawKey}`), raw: issued.rawKey, id: issued.key.id };
    }

    it('C-60: the principal carries the stored scopes; an operation outside them is 403 with the scope detail, inside them allowed', async () => {
      const reader = await issueAs(OPERATOR, { scopes: ['organisations:read', 'members:read'] });
      expect(reader.principal.scopes).to.deep.equal(['members:read', 'organisations:read']);
      expect((await f.core.organisations.get(reader.principal, f.orgId)).id).to.equal(f.orgId);
      await f.core.members.list(reader.principal, f.orgId, {});
      const refused = await rejection(f.core.apiKeys.list(reader.principal, f.orgId, {}));
      expect(refused).to.be.instanceOf(ForbiddenError);
      expect((refused as ForbiddenError).details).to.deep.equal([{ field: 'scope', issue: 'requires api_keys:read' }]);
      expect(f.owner.scopes).to.deep.equal([...ALL_BUILTIN_SCOPES]);
    });

    it('C-60: escalation is refused and writes nothing; self-revocation needs no scope', async () => {
      const writer = await issueAs(OPERATOR, { scopes: ['api_keys:write'] });
      const before = await store.stores.apiKeys.list(f.orgId, PAGE);
      const escalation = await rejection(f.core.apiKeys.issue(writer.principal, f.orgId, { label: 'x', scopes: ['api_keys:write', 'audit:read'] }));
      expect(escalation).to.be.instanceOf(ForbiddenError);
      expect(escalation.message).to.equal(SCOPE_ESCALATION_MESSAGE);
      expect(await store.stores.apiKeys.list(f.orgId, PAGE)).to.deep.equal(before);
      const reader = await issueAs(OPERATOR, { scopes: ['members:read'] });
      await f.core.apiKeys.revoke(reader.principal, f.orgId, reader.id);
      expect(await rejection(f.core.authenticator.authenticate(`Bearer ${reader.raw}`))).to.be.instanceOf(UnauthorizedError);
    });

    it('C-61: lineage through issue and roll: created_by_key_id names the issuing or rolling key, null for the operator', async () => {
      const child = await issueAs(f.owner, { scopes: ['api_keys:write', 'api_keys:read'] });
      expect((await f.core.apiKeys.get(OPERATOR, f.orgId, child.id)).createdByKeyId).to.equal(f.owner.keyId);
      const grandchild = await issueAs(child.principal, {});
      const stored = await f.core.apiKeys.get(OPERATOR, f.orgId, grandchild.id);
      expect(stored).to.deep.include({ createdByKeyId: child.id, scopes: ['api_keys:read', 'api_keys:write'] });
      const rolled = await f.core.apiKeys.roll(child.principal, f.orgId, grandchild.id, { scopes: ['api_keys:read'] });
      expect((await f.core.apiKeys.get(OPERATOR, f.orgId, rolled.key.id))).to.deep.include({
        createdByKeyId: child.id,
        rolledFromKeyId: grandchild.id,
        scopes: ['api_keys:read'],
      });
      const byOperator = await f.core.apiKeys.roll(OPERATOR, f.orgId, rolled.key.id, {});
      expect((await f.core.apiKeys.get(OPERATOR, f.orgId, byOperator.key.id)).createdByKeyId).to.equal(null);
      expect((await store.stores.apiKeys.listCreatedBy(child.id)).map((k) => k.id)).to.have.members([grandchild.id, rolled.key.id]);
    });

    it('C-62: the policy is replaced and audited (old and new) in one unit of work, and applied at issue and roll', async () => {
      const testKey = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'test', environment: 'test' });
      const policy = await f.core.keyPolicies.replace(f.platform, f.orgId, STRICT);
      expect(policy).to.deep.equal({ maxLifetimeSeconds: 86_400, allowedEnvironments: ['live'], exposureResponse: 'revoke_key_and_descendants', expiryNoticeSeconds: 604_800 });
      expect(await f.core.keyPolicies.get(f.owner, f.orgId)).to.deep.equal(policy);
      const [entry] = await store.stores.audit.list({ kind: 'organisation_policy_updated' }, PAGE);
      expect(entry?.keyPolicy).to.deep.equal({
        old: { maxLifetimeSeconds: null, allowedEnvironments: ['live', 'test'], exposureResponse: 'revoke_key', expiryNoticeSeconds: 604_800 },
        new: policy,
      });
      const now = f.tc.clock.now().getTime();
      const capped = await f.core.apiKeys.issue(f.owner, f.orgId, { label: 'capped' });
      expect(capped.key.expiresAt?.getTime()).to.equal(now + 86_400_000);
      const later = await rejection(f.core.apiKeys.issue(f.owner, f.orgId, { label: 'later', expires_at: new Date(now + 86_400_001).toISOString() }));
      expect((later as ValidationError).details.map((d) => d.field)).to.deep.equal(['expires_at']);
      const env = await rejection(f.core.apiKeys.issue(f.owner, f.orgId, { label: 'test', environment: 'test' }));
      expect((env as ValidationError).details.map((d) => d.field)).to.deep.equal(['environment']);
      const roll = await rejection(f.core.apiKeys.roll(f.owner, f.orgId, testKey.key.id, {}));
      expect((roll as ValidationError).details.map((d) => d.field)).to.deep.equal(['environment']);
      const rolled = await f.core.apiKeys.roll(f.owner, f.orgId, capped.key.id, {});
      expect(rolled.key.expiresAt?.getTime()).to.equal(now + 86_400_000);
      expect(await rejection(f.core.keyPolicies.replace(f.owner, f.orgId, STRICT))).to.be.instanceOf(ForbiddenError);
    });

    it('C-61, C-62: an exposure lists the active descendants and, under revoke_key_and_descendants, revokes them in the same unit of work', async () => {
      await f.core.webhooks.set(OPERATOR, f.orgId, 'https://receiver.example/hook');
      const child = await issueAs(f.owner, {});
      const grandchild = await issueAs(child.principal, {});
      const sibling = await issueAs(f.owner, {});
      await f.core.apiKeys.revoke(OPERATOR, f.orgId, sibling.id);
      await f.core.keyPolicies.replace(f.platform, f.orgId, STRICT);
      const report = await f.core.secretScanning.report([{ token: f.ownerRaw, type: 'cos_api_key', url: 'https://example.com/leak', source: 'content' }]);
      expect(report.outcomes.revoked).to.equal(1);
      const exposed = (await store.stores.audit.list({ kind: 'api_key_exposed' }, PAGE))[0];
      expect(exposed?.descendantKeyIds).to.deep.equal([child.id, grandchild.id].sort());
      const revoked = (await store.stores.audit.list({ kind: 'api_key_revoked' }, PAGE)).filter((e) => e.actor.type === 'secret_scanning');
      expect(revoked.map((e) => e.keyId)).to.have.members([f.owner.keyId, child.id, grandchild.id]);
      for (const raw of [f.ownerRaw, child.raw, grandchild.raw]) {
        expect(await rejection(f.core.authenticator.authenticate(`Bearer ${raw}`))).to.be.instanceOf(UnauthorizedError);
      }
      const events = await store.stores.outbox.list({ organisationId: f.orgId, status: 'pending' }, PAGE);
      const revokedEvents = events.filter((n) => n.type === 'api_key.revoked').map((n) => (JSON.parse(n.payload) as { data: { key_id: string } }).data.key_id);
      expect(revokedEvents).to.include.members([f.owner.keyId, child.id, grandchild.id]);
    });

    describe("a platform key's lineage across organisations (C-100, C-101)", () => {
      const LEAK = { type: 'cos_api_key', url: 'https://example.com/leak', source: 'content' };
      /** P2, a platform key of the system organisation; KB, issued by P2 in the organisation; KB2, issued by KB. */
      async function lineage() {
        const systemId = f.platform.organisationId;
        const p2issued = await f.core.apiKeys.issue(f.platform, systemId, { label: 'p2' });
        const p2 = { principal: await f.core.authenticator.authenticate(`Bearer ${p2issued.rawKey}`), raw: p2issued.rawKey, id: p2issued.key.id };
        const kb = await issueAs(p2.principal, {});
        const kb2 = await issueAs(kb.principal, {});
        for (const orgId of [systemId, f.orgId]) await f.core.webhooks.set(OPERATOR, orgId, 'https://receiver.example/hook');
        return { systemId, p2, kb, kb2 };
      }
      const alive = async (raw: string): Promise<boolean> =>
        f.core.authenticator.authenticate(`Bearer ${raw}`).then(
          () => true,
          (e: unknown) => (e instanceof UnauthorizedError ? false : Promise.reject(e)),
        );
      /** Each organisation's chain links from genesis, without a gap, every hash recomputed. */
      async function expectChainsIntact(...orgIds: string[]): Promise<void> {
        for (const orgId of orgIds) {
          const chain = await store.stores.audit.chain(orgId, { afterSeq: 0, limit: 1000 });
          chain.forEach((e, i) => {
            expect(e.seq, `${orgId} entry ${i}`).to.equal(i + 1);
            expect(e.prevHash, `${orgId} entry ${i}`).to.equal(i === 0 ? GENESIS_HASH : chain[i - 1]!.hash);
            expect(entryHash(e), `${orgId} entry ${i}`).to.equal(e.hash);
          });
        }
      }

      it("C-100, C-101: under the system organisation's revoke_key_and_descendants an exposed platform key takes KB and KB2 in the other organisation with it, each audited and announced there, in one unit of work", async () => {
        const { systemId, p2, kb, kb2 } = await lineage();
        await f.core.keyPolicies.replace(f.platform, systemId, { ...STRICT, allowed_environments: ['live', 'test'] });
        const report = await f.core.secretScanning.report([{ token: p2.raw, ...LEAK }]);
        expect(report.outcomes.revoked).to.equal(1);
        for (const k of [p2, kb, kb2]) expect(await alive(k.raw), k.id).to.equal(false);
        expect(await alive(f.ownerRaw), 'not a descendant').to.equal(true);
        expect(await rejection(f.core.authenticator.authenticate(`Bearer ${kb.raw}`)), 'KB can no longer issue: it does not authenticate').to.be.instanceOf(UnauthorizedError);

        const exposed = await store.stores.audit.list({ organisationId: systemId, kind: 'api_key_exposed' }, PAGE);
        expect(exposed.map((e) => e.descendantKeyIds)).to.deep.equal([[kb.id, kb2.id].sort()]);
        const revokedIn = async (orgId: string) =>
          (await store.stores.audit.list({ organisationId: orgId, kind: 'api_key_revoked' }, PAGE)).map((e) => [e.keyId, e.organisationId, e.actor.type]);
        expect(await revokedIn(systemId)).to.deep.equal([[p2.id, systemId, 'secret_scanning']]);
        expect((await revokedIn(f.orgId)).sort()).to.deep.equal([[kb.id, f.orgId, 'secret_scanning'], [kb2.id, f.orgId, 'secret_scanning']].sort());
        await expectChainsIntact(systemId, f.orgId);

        const events = async (orgId: string) =>
          (await store.stores.outbox.list({ organisationId: orgId, status: 'pending' }, PAGE))
            .filter((n) => n.type === 'api_key.revoked' || n.type === 'api_key.exposed')
            .map((n) => {
              const data = (JSON.parse(n.payload) as { data: { organisation_id: string; key_id: string; descendant_key_ids?: string[] } }).data;
              return [n.type, n.organisationId, data.organisation_id, data.key_id, data.descendant_key_ids ?? null];
            });
        expect((await events(systemId)).sort()).to.deep.equal(
          [
            ['api_key.exposed', systemId, systemId, p2.id, [kb.id, kb2.id].sort()],
            ['api_key.revoked', systemId, systemId, p2.id, null],
          ].sort(),
        );
        expect((await events(f.orgId)).sort()).to.deep.equal(
          [
            ['api_key.revoked', f.orgId, f.orgId, kb.id, null],
            ['api_key.revoked', f.orgId, f.orgId, kb2.id, null],
          ].sort(),
        );
      });

      it("C-100: the policy of the leaked key's organisation decides: under the system organisation's default only P2 is revoked, though the other organisation revokes descendants", async () => {
        const { systemId, p2, kb, kb2 } = await lineage();
        await f.core.keyPolicies.replace(f.platform, f.orgId, { ...STRICT, allowed_environments: ['live', 'test'] });
        await f.core.secretScanning.report([{ token: p2.raw, ...LEAK }]);
        expect(await alive(p2.raw)).to.equal(false);
        expect(await alive(kb.raw)).to.equal(true);
        expect(await alive(kb2.raw)).to.equal(true);
        const exposed = await store.stores.audit.list({ organisationId: systemId, kind: 'api_key_exposed' }, PAGE);
        expect(exposed.map((e) => e.descendantKeyIds), 'listed all the same').to.deep.equal([[kb.id, kb2.id].sort()]);
        expect(await store.stores.audit.list({ organisationId: f.orgId, kind: 'api_key_revoked' }, PAGE)).to.deep.equal([]);
        // KB's own exposure follows its organisation's policy: KB2 goes with it.
        await f.core.secretScanning.report([{ token: kb.raw, ...LEAK }]);
        expect(await alive(kb.raw)).to.equal(false);
        expect(await alive(kb2.raw)).to.equal(false);
        await expectChainsIntact(systemId, f.orgId);
      });

      it('C-101: a failure while revoking a descendant in the other organisation rolls the whole exposure back, in both organisations', async () => {
        const { systemId, p2, kb, kb2 } = await lineage();
        await f.core.keyPolicies.replace(f.platform, systemId, { ...STRICT, allowed_environments: ['live', 'test'] });
        const auditBefore = await store.stores.audit.list({}, PAGE);
        const outboxBefore = await store.stores.outbox.list({}, PAGE);
        const failing = createTestCore({
          store: {
            ...store,
            unitOfWork: {
              run: (work) => store.unitOfWork.run(work),
              changeCredentials: (organisationIds, work) =>
                store.unitOfWork.changeCredentials(organisationIds, (stores: Stores) => {
                  const apiKeys = Object.create(stores.apiKeys) as Stores['apiKeys'];
                  apiKeys.revoke = async (organisationId, keyId, at) => {
                    if (keyId === kb2.id) throw new Error('disk full');
                    return stores.apiKeys.revoke(organisationId, keyId, at);
                  };
                  return work({ ...stores, apiKeys });
                }),
            },
          },
          clock: f.tc.clock,
        });
        expect((await rejection(failing.core.secretScanning.report([{ token: p2.raw, ...LEAK }]))).message).to.equal('disk full');
        expect(await store.stores.audit.list({}, PAGE)).to.deep.equal(auditBefore);
        expect(await store.stores.outbox.list({}, PAGE)).to.deep.equal(outboxBefore);
        for (const k of [p2, kb, kb2]) expect(await alive(k.raw), k.id).to.equal(true);
      });
    });

    it('C-62: a failure while revoking a descendant rolls the whole exposure back: no revocation, no entry, no event', async () => {
      const child = await issueAs(f.owner, {});
      await issueAs(child.principal, {});
      await f.core.keyPolicies.replace(f.platform, f.orgId, STRICT);
      const auditBefore = await store.stores.audit.list({}, PAGE);
      const failing = createTestCore({
        store: {
          ...store,
          unitOfWork: {
            run: (work) => store.unitOfWork.run(work),
            changeCredentials: (organisationIds, work) =>
              store.unitOfWork.changeCredentials(organisationIds, (stores: Stores) => {
                let revokes = 0;
                const apiKeys = Object.create(stores.apiKeys) as Stores['apiKeys'];
                apiKeys.revoke = async (...args) => {
                  if (++revokes === 3) throw new Error('disk full');
                  return stores.apiKeys.revoke(...args);
                };
                return work({ ...stores, apiKeys });
              }),
          },
        },
        clock: f.tc.clock,
      });
      expect((await rejection(failing.core.secretScanning.report([{ token: f.ownerRaw, type: 'cos_api_key' }]))).message).to.equal('disk full');
      expect(await store.stores.audit.list({}, PAGE)).to.deep.equal(auditBefore);
      expect((await f.core.authenticator.authenticate(`Bearer ${f.ownerRaw}`)).keyId).to.equal(f.owner.keyId);
      expect((await f.core.authenticator.authenticate(`Bearer ${child.raw}`)).keyId).to.equal(child.id);
    });
  });
}

describeLeastPrivilege('the in-memory store', async () => createInMemoryStore());

forEachTarget('least privilege', (target) => {
  describeLeastPrivilege(target.name, () => target.open());
});
