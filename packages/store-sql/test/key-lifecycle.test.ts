/**
 * The key lifecycle through the real core on every store (in-memory, SQLite file and :memory:, Postgres), with
 * a FakeClock: rolling a key (grace, grace 0, grace beyond the old key's expiry, revoked / expired /
 * another organisation's key, concurrent rolls, the cap C-25, the audit entries C-58 and the webhook
 * event C-59), and last_used_at (written after the 60 s interval, never by a failed authentication,
 * one statement per flush, two instances on one Postgres). Store semantics alone are in the
 * ApiKeyStore contract suite.
 */
import { expect } from 'chai';
import {
  ConflictError,
  ForbiddenError,
  KEY_ALREADY_ROLLED_MESSAGE,
  KEY_EXPIRED_ROLL_MESSAGE,
  KEY_REVOKED_ROLL_MESSAGE,
  NotFoundError,
  OPERATOR,
  UnauthorizedError,
  ValidationError,
  type Core,
  type KeyPrincipal,
} from '@cos/core';
import { createInMemoryStore, createTestCore, FakeClock, type StoreHarness, type TestCore } from '@cos/core/testing';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import { forEachTarget } from './support/targets.js';
import { rejection } from '@cos/test-support/rejection';

const HOOK = 'https://receiver.example/hook';
const GRACE = 3_600;
const MINUTE = 60_000;
const PAGE = { limit: 100, after: null } as const;

interface Fixture {
  tc: TestCore;
  core: Core;
  clock: FakeClock;
  orgId: string;
  otherOrgId: string;
  /** A standard key of the organisation, as a principal (an HTTP caller). */
  caller: KeyPrincipal;
  otherCaller: KeyPrincipal;
}

async function fixture(store: StoreHarness, config: { maxActiveKeysPerOrg?: number } = {}): Promise<Fixture> {
  const tc = createTestCore({ store, config });
  const { core } = tc;
  const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: `acme-${Math.random().toString(36).slice(2, 10)}` });
  const other = await core.organisations.create(OPERATOR, { name: 'Globex', slug: `globex-${Math.random().toString(36).slice(2, 10)}` });
  const own = await core.apiKeys.issue(OPERATOR, org.id, { label: 'caller' });
  const otherKey = await core.apiKeys.issue(OPERATOR, other.id, { label: 'other caller' });
  const caller = await core.authenticator.authenticate(`Bearer ${own.rawKey}`);
  const otherCaller = await core.authenticator.authenticate(`Bearer ${otherKey.rawKey}`);
  return { tc, core, clock: tc.clock, orgId: org.id, otherOrgId: other.id, caller, otherCaller };
}

const bearer = (raw: string): string => `Bearer ${raw}`;

type Harness = StoreHarness & Partial<Pick<SqlStore, 'onStatement' | 'query'>>;

function describeKeyLifecycle(name: string, open: () => Promise<Harness>, postgresUrl?: string): void {
  describe(`key lifecycle (C-56, C-58) on ${name}`, () => {
    let store: Harness;
    let f: Fixture;
    beforeEach(async () => {
      store = await open();
      f = await fixture(store);
    });
    afterEach(async () => {
      await f.core.keyUsage.stop();
      await store.close();
    });

    const auditOf = async (keyId: string) => (await f.core.audit.list(OPERATOR, { limit: '100' })).items.filter((e) => e.keyId === keyId);

    describe('roll', () => {
      it('with a grace period: the old key works until the grace ends, then 401; the new key inherits label, environment and expiry', async () => {
        const expiresAt = new Date(f.clock.now().getTime() + 30 * 86_400_000);
        const old = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'deploy', environment: 'test', expires_at: expiresAt.toISOString() });
        await f.core.webhooks.set(OPERATOR, f.orgId, HOOK);
        const rolledAt = f.clock.now();
        const rolled = await f.core.apiKeys.roll(f.caller, f.orgId, old.key.id, { grace_period_seconds: GRACE });
        expect(rolled.rawKey).to.match(/^svc_test_[A-Za-z0-9]{48}$/);
        expect(rolled.key).to.include({ label: 'deploy', rolledFromKeyId: old.key.id, revokedAt: null, lastUsedAt: null });
        expect(rolled.key.expiresAt?.toISOString()).to.equal(expiresAt.toISOString());
        const stored = await f.core.apiKeys.get(OPERATOR, f.orgId, rolled.key.id);
        expect(stored.rolledFromKeyId).to.equal(old.key.id);
        const end = rolledAt.getTime() + GRACE * 1000;
        expect((await f.core.apiKeys.get(OPERATOR, f.orgId, old.key.id)).expiresAt?.getTime()).to.equal(end);

        f.clock.set(new Date(end - 1));
        expect((await f.core.authenticator.authenticate(bearer(old.rawKey))).keyId).to.equal(old.key.id);
        expect((await f.core.authenticator.authenticate(bearer(rolled.rawKey))).keyId).to.equal(rolled.key.id);
        f.clock.set(new Date(end));
        expect(await rejection(f.core.authenticator.authenticate(bearer(old.rawKey)))).to.be.instanceOf(UnauthorizedError);
        expect((await f.core.authenticator.authenticate(bearer(rolled.rawKey))).keyId).to.equal(rolled.key.id);

        const entries = await auditOf(old.key.id);
        const rolledEntry = entries.find((e) => e.kind === 'api_key_rolled');
        expect(rolledEntry).to.deep.include({ keyPrefix: old.key.keyPrefix, actor: { type: 'api_key', keyId: f.caller.keyId } });
        expect(rolledEntry?.roll).to.deep.equal({ toKeyId: rolled.key.id, gracePeriodSeconds: GRACE });
        expect(entries.filter((e) => e.kind === 'api_key_revoked')).to.have.length(0);
        const events = await store.stores.outbox.list({ organisationId: f.orgId }, PAGE);
        const rolledEvents = events.filter((n) => n.type === 'api_key.rolled');
        expect(rolledEvents).to.have.length(1);
        expect(JSON.parse(rolledEvents[0]!.payload).data).to.deep.equal({
          organisation_id: f.orgId,
          key_id: old.key.id,
          key_prefix: old.key.keyPrefix,
          label: 'deploy',
          new_key_id: rolled.key.id,
          new_key_prefix: rolled.key.keyPrefix,
          grace_period_seconds: GRACE,
          cause: { type: 'api_key', key_id: f.caller.keyId },
        });
        expect(events.some((n) => n.type === 'api_key.revoked')).to.equal(false);
        for (const n of events) expect(n.payload).to.not.include(rolled.rawKey);
      });

      it('with grace 0 (the default): the old key is revoked in the same unit of work and gets 401 at once', async () => {
        const old = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'ci' });
        await f.core.webhooks.set(OPERATOR, f.orgId, HOOK);
        const rolled = await f.core.apiKeys.roll(OPERATOR, f.orgId, old.key.id, {});
        expect(rolled.rawKey).to.match(/^svc_live_/);
        expect(rolled.key.expiresAt).to.equal(null);
        const after = await f.core.apiKeys.get(OPERATOR, f.orgId, old.key.id);
        expect(after.revokedAt?.getTime()).to.equal(f.clock.now().getTime());
        expect(after.expiresAt).to.equal(null);
        expect(await rejection(f.core.authenticator.authenticate(bearer(old.rawKey)))).to.be.instanceOf(UnauthorizedError);
        const kinds = (await auditOf(old.key.id)).map((e) => e.kind);
        expect(kinds).to.include.members(['api_key_issued', 'api_key_rolled', 'api_key_revoked']);
        expect((await auditOf(old.key.id)).find((e) => e.kind === 'api_key_rolled')?.roll).to.deep.equal({ toKeyId: rolled.key.id, gracePeriodSeconds: 0 });
        const types = (await store.stores.outbox.list({ organisationId: f.orgId }, PAGE)).map((n) => n.type);
        expect(types).to.include.members(['api_key.rolled', 'api_key.revoked']);
      });

      it('a grace beyond the old key\'s expiry never extends it', async () => {
        const expiresAt = new Date(f.clock.now().getTime() + 600_000);
        const old = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'short', expires_at: expiresAt.toISOString() });
        const rolled = await f.core.apiKeys.roll(OPERATOR, f.orgId, old.key.id, { grace_period_seconds: 604_800, label: 'renamed' });
        expect(rolled.key.label).to.equal('renamed');
        expect((await f.core.apiKeys.get(OPERATOR, f.orgId, old.key.id)).expiresAt?.getTime()).to.equal(expiresAt.getTime());
        f.clock.set(expiresAt);
        expect(await rejection(f.core.authenticator.authenticate(bearer(old.rawKey)))).to.be.instanceOf(UnauthorizedError);
        expect(await rejection(f.core.authenticator.authenticate(bearer(rolled.rawKey))), 'the new key keeps the old expiry').to.be.instanceOf(UnauthorizedError);
      });

      it('a revoked or an expired key is 409 with a clear message, and nothing is written', async () => {
        const revoked = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'gone' });
        await f.core.apiKeys.revoke(OPERATOR, f.orgId, revoked.key.id);
        const expiring = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'old', expires_at: new Date(f.clock.now().getTime() + 1000).toISOString() });
        f.clock.advance(1000);
        const before = (await store.stores.apiKeys.list(f.orgId, PAGE)).length;
        const auditBefore = (await f.core.audit.list(OPERATOR, { limit: '100' })).items.length;
        const r1 = await rejection(f.core.apiKeys.roll(f.caller, f.orgId, revoked.key.id, { grace_period_seconds: 60 }));
        expect(r1).to.be.instanceOf(ConflictError);
        expect(r1.message).to.equal(KEY_REVOKED_ROLL_MESSAGE);
        const r2 = await rejection(f.core.apiKeys.roll(f.caller, f.orgId, expiring.key.id, {}));
        expect(r2).to.be.instanceOf(ConflictError);
        expect(r2.message).to.equal(KEY_EXPIRED_ROLL_MESSAGE);
        expect((await store.stores.apiKeys.list(f.orgId, PAGE)).length).to.equal(before);
        expect((await f.core.audit.list(OPERATOR, { limit: '100' })).items.length).to.equal(auditBefore);
      });

      it('C-33, C-34: another organisation\'s key is 403 for a standard key (existing or not, before validation); an unknown key of its own is 404', async () => {
        const theirs = await f.core.apiKeys.issue(OPERATOR, f.otherOrgId, { label: 'theirs' });
        expect(await rejection(f.core.apiKeys.roll(f.caller, f.otherOrgId, theirs.key.id, {}))).to.be.instanceOf(ForbiddenError);
        expect(await rejection(f.core.apiKeys.roll(f.caller, f.otherOrgId, theirs.key.id, { bogus: 1 }))).to.be.instanceOf(ForbiddenError);
        expect(await rejection(f.core.apiKeys.roll(f.caller, f.orgId, theirs.key.id, {}))).to.be.instanceOf(NotFoundError);
        expect((await f.core.apiKeys.get(OPERATOR, f.otherOrgId, theirs.key.id)).revokedAt).to.equal(null);
      });

      it('C-11: bad input is a ValidationError naming every failing field and changes nothing', async () => {
        const old = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'keep' });
        for (const [body, fields] of [
          [{ grace_period_seconds: -1 }, ['grace_period_seconds']],
          [{ grace_period_seconds: 604_801 }, ['grace_period_seconds']],
          [{ grace_period_seconds: 1.5 }, ['grace_period_seconds']],
          [{ grace_period_seconds: '60' }, ['grace_period_seconds']],
          [{ label: '' }, ['label']],
          [{ rolled_from: 'x', grace_period_seconds: 5 }, ['rolled_from']],
        ] as const) {
          const error = await rejection(f.core.apiKeys.roll(f.caller, f.orgId, old.key.id, body));
          expect(error, JSON.stringify(body)).to.be.instanceOf(ValidationError);
          expect((error as ValidationError).details.map((d) => d.field)).to.deep.equal(fields);
        }
        expect((await f.core.apiKeys.get(OPERATOR, f.orgId, old.key.id)).expiresAt).to.equal(null);
        expect((await store.stores.apiKeys.list(f.orgId, PAGE)).filter((k) => k.rolledFromKeyId !== null)).to.have.length(0);
      });

      it('a key is rolled once: rolling it again (still in its grace period) is 409; its replacement can be rolled', async () => {
        const old = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'twice' });
        const first = await f.core.apiKeys.roll(OPERATOR, f.orgId, old.key.id, { grace_period_seconds: GRACE });
        const again = await rejection(f.core.apiKeys.roll(OPERATOR, f.orgId, old.key.id, { grace_period_seconds: GRACE }));
        expect(again).to.be.instanceOf(ConflictError);
        expect(again.message).to.equal(KEY_ALREADY_ROLLED_MESSAGE);
        const second = await f.core.apiKeys.roll(OPERATOR, f.orgId, first.key.id, {});
        expect(second.key.rolledFromKeyId).to.equal(first.key.id);
      });

      it('concurrent rolls of one key: exactly one succeeds; one new key, one api_key_rolled entry', async () => {
        const old = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'race' });
        for (const grace of [0, GRACE]) {
          const target = grace === 0 ? old : await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: `race ${grace}` });
          const results = await Promise.allSettled(
            Array.from({ length: 6 }, () => f.core.apiKeys.roll(OPERATOR, f.orgId, target.key.id, { grace_period_seconds: grace })),
          );
          expect(results.filter((r) => r.status === 'fulfilled'), `grace ${grace}`).to.have.length(1);
          for (const r of results) if (r.status === 'rejected') expect(r.reason, `grace ${grace}`).to.be.instanceOf(ConflictError);
          expect((await store.stores.apiKeys.list(f.orgId, PAGE)).filter((k) => k.rolledFromKeyId === target.key.id)).to.have.length(1);
          expect((await auditOf(target.key.id)).filter((e) => e.kind === 'api_key_rolled')).to.have.length(1);
        }
      });

      it('C-25: only the new key counts against the cap: an organisation at the cap can still roll', async () => {
        await store.close();
        store = await open();
        f = await fixture(store, { maxActiveKeysPerOrg: 2 });
        const second = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'second' });
        expect(await rejection(f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'third' }))).to.be.instanceOf(ConflictError);
        const rolled = await f.core.apiKeys.roll(OPERATOR, f.orgId, second.key.id, { grace_period_seconds: GRACE });
        expect(rolled.key.rolledFromKeyId).to.equal(second.key.id);
        // Three active now (the old one until its grace ends): a roll of another key is over the cap.
        const error = await rejection(f.core.apiKeys.roll(OPERATOR, f.orgId, f.caller.keyId, {}));
        expect(error).to.be.instanceOf(ConflictError);
        expect(error.message).to.match(/maximum number of active API keys \(2\)/);
      });
    });

    describe('last_used_at', () => {
      it('is null until used; a first use is written at once (in the background), a later use with the next write, within the interval', async () => {
        const k = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'used' });
        expect((await f.core.apiKeys.get(OPERATOR, f.orgId, k.key.id)).lastUsedAt).to.equal(null);
        f.clock.advance(MINUTE); // the fixture's own authentications are due: flush them out of the way
        await f.core.keyUsage.flushIfDue();
        f.clock.advance(f.core.keyUsage.minGapMs); // flushes start at most once per minGapMs
        const usedAt = f.clock.now();
        await f.core.authenticator.authenticate(bearer(k.rawKey));
        await f.core.keyUsage.flushIfDue(); // waits for the flush that first use started
        expect((await f.core.apiKeys.get(OPERATOR, f.orgId, k.key.id)).lastUsedAt?.getTime(), 'the first use: at once').to.equal(usedAt.getTime());
        f.clock.advance(20_000);
        await f.core.authenticator.authenticate(bearer(k.rawKey));
        await f.core.keyUsage.flushIfDue();
        expect((await f.core.apiKeys.get(OPERATOR, f.orgId, k.key.id)).lastUsedAt?.getTime(), 'a later use: not yet').to.equal(usedAt.getTime());
        f.clock.advance(40_000);
        await f.core.keyUsage.flushIfDue();
        const lastUsed = (await f.core.apiKeys.get(OPERATOR, f.orgId, k.key.id)).lastUsedAt;
        expect(lastUsed?.getTime()).to.equal(usedAt.getTime() + 20_000);
        expect(f.clock.now().getTime() - lastUsed!.getTime()).to.be.at.most(MINUTE);
      });

      it('a use after the interval starts the flush itself (no timer needed), in the background', async () => {
        const k = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'busy' });
        f.clock.advance(MINUTE);
        await f.core.authenticator.authenticate(bearer(k.rawKey));
        await f.core.keyUsage.flushIfDue(); // waits for the flush that use started
        expect((await f.core.apiKeys.get(OPERATOR, f.orgId, k.key.id)).lastUsedAt?.getTime()).to.equal(f.clock.now().getTime());
      });

      it('failed authentications never update it: revoked, expired, unknown and malformed keys', async () => {
        const revoked = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'revoked' });
        await f.core.apiKeys.revoke(OPERATOR, f.orgId, revoked.key.id);
        const expired = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'expired', expires_at: new Date(f.clock.now().getTime() + 10).toISOString() });
        f.clock.advance(10);
        for (const raw of [revoked.rawKey, expired.rawKey, `svc_live_${'Q'.repeat(48)}`, 'svc_live_short']) {
          expect(await rejection(f.core.authenticator.authenticate(bearer(raw)))).to.be.instanceOf(UnauthorizedError);
        }
        f.clock.advance(MINUTE);
        await f.core.keyUsage.flush();
        for (const k of [revoked, expired]) expect((await f.core.apiKeys.get(OPERATOR, f.orgId, k.key.id)).lastUsedAt, k.key.label).to.equal(null);
      });

      {
        it('batched: 100 uses of 5 keys are a few statements, each carrying every pending key, never one per request', async function () {
          if (store.onStatement === undefined) this.skip();
          // Every statement the store sends is told to SqlStore.onStatement listeners.
          const tc = createTestCore({ store, clock: f.clock });
          const keys = await Promise.all(Array.from({ length: 5 }, (_, i) => tc.core.apiKeys.issue(OPERATOR, f.orgId, { label: `k${i}` })));
          const statements: string[] = [];
          const stop = store.onStatement!((q) => statements.push(q.sql));
          let lastRound = f.clock.now();
          try {
            for (let round = 0; round < 20; round++) {
              lastRound = f.clock.now();
              for (const k of keys) await tc.core.authenticator.authenticate(bearer(k.rawKey));
              await tc.core.keyUsage.flushIfDue(); // lets a flush that a use started finish
              f.clock.advance(1_000);
            }
            const writes = (): string[] => statements.filter((s) => /^\s*(update|insert|delete)/i.test(s));
            // The first uses are due at once: at most one flush per minGapMs writes them all; the
            // later ones wait for the interval. Nowhere near one statement per request.
            expect(writes().length, 'first uses, in batches').to.be.within(1, 3);
            for (const w of writes()) expect(w).to.match(/last_used_at/);
            const before = writes().length;
            await tc.core.keyUsage.flush();
            expect(writes(), 'everything pending in ONE statement').to.have.length(before + 1);
            await tc.core.keyUsage.flush();
            expect(writes(), 'nothing pending: no statement').to.have.length(before + 1);
          } finally {
            stop();
          }
          for (const k of keys) expect((await tc.core.apiKeys.get(OPERATOR, f.orgId, k.key.id)).lastUsedAt?.getTime(), k.key.label).to.equal(lastRound.getTime());
          for (const k of keys) expect((await tc.core.apiKeys.get(OPERATOR, f.orgId, k.key.id)).lastUsedAt).to.not.equal(null);
        });
      }

      if (postgresUrl !== undefined) {
        it('two instances on one Postgres: each flushes its own uses; the latest use wins whatever the order', async () => {
          const schema = (await store.query!<{ s: string }>('SELECT current_schema() AS s'))[0]!.s;
          const second: SqlStore = createSqlStore({ databaseUrl: postgresUrl, schema });
          try {
            const other = createTestCore({ store: second, clock: new FakeClock(f.clock.now()) });
            const shared = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'shared' });
            const onlyB = await f.core.apiKeys.issue(OPERATOR, f.orgId, { label: 'only b' });
            const t0 = f.clock.now().getTime();
            await f.core.authenticator.authenticate(bearer(shared.rawKey)); // instance A at t0
            other.clock.set(new Date(t0 + 30_000));
            await other.core.authenticator.authenticate(bearer(shared.rawKey)); // instance B later
            await other.core.authenticator.authenticate(bearer(onlyB.rawKey));
            // B flushes first, then A's older use arrives: it must not move the key back.
            await other.core.keyUsage.flush();
            await f.core.keyUsage.flush();
            expect((await f.core.apiKeys.get(OPERATOR, f.orgId, shared.key.id)).lastUsedAt?.getTime()).to.equal(t0 + 30_000);
            expect((await f.core.apiKeys.get(OPERATOR, f.orgId, onlyB.key.id)).lastUsedAt?.getTime()).to.equal(t0 + 30_000);
            // A later use on A wins in turn.
            f.clock.set(new Date(t0 + 45_000));
            await f.core.authenticator.authenticate(bearer(shared.rawKey));
            await f.core.keyUsage.flush();
            expect((await other.core.apiKeys.get(OPERATOR, f.orgId, shared.key.id)).lastUsedAt?.getTime()).to.equal(t0 + 45_000);
          } finally {
            await second.close();
          }
        });
      }
    });
  });
}

describeKeyLifecycle('the in-memory store', async () => createInMemoryStore());

forEachTarget('key lifecycle', (target) => {
  describeKeyLifecycle(target.name, () => target.open(), target.dialect === 'postgres' ? process.env.TEST_DATABASE_URL : undefined);
});
