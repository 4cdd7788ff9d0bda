/** Contract suite of AuditLog (C-40, C-41; paging C-6, C-7 over occurredAt). */
import { expect } from 'chai';
import { AUDIT_KINDS, type AuditEntry } from '../../domain/audit.js';
import type { StoreHarness, StoreHarnessFactory } from '../harness.js';
import { ascendingIds, at, expectSameInstant, newApiKey, newAuditEntry, newOrganisation } from './fixtures.js';
import type { ApiKey } from '../../domain/api-key.js';
import { describeKeysetPaging } from './paging.js';
import { randomUUID } from 'node:crypto';
import { entryHash, GENESIS_HASH, type ChainedAuditEntry } from '../../domain/audit-chain.js';
import { ChainVerifier } from '../../domain/audit-verify.js';
import { auditRecord } from '../../domain/audit-chain.js';

export function expectAuditEntry(actual: AuditEntry | undefined | null, expected: AuditEntry): void {
  expect(actual, `audit entry ${expected.id}`).to.not.equal(undefined);
  expect(actual, `audit entry ${expected.id}`).to.not.equal(null);
  const e = actual as AuditEntry;
  expect(e.id).to.equal(expected.id);
  expect(e.kind).to.equal(expected.kind);
  expectSameInstant(e.occurredAt, expected.occurredAt, 'occurredAt');
  expect(e.organisationId).to.equal(expected.organisationId);
  expect(e.keyId).to.equal(expected.keyId);
  expect(e.keyPrefix).to.equal(expected.keyPrefix);
  expect(e.actor).to.deep.equal(expected.actor);
  if (expected.exposure === undefined) expect(e, 'no exposure property').to.not.have.property('exposure');
  else expect(e.exposure).to.deep.equal(expected.exposure);
  if (expected.member === undefined) expect(e, 'no member property').to.not.have.property('member');
  else expect(e.member).to.deep.equal(expected.member);
  if (expected.roll === undefined) expect(e, 'no roll property').to.not.have.property('roll');
  else expect(e.roll).to.deep.equal(expected.roll);
  if (expected.webhook === undefined) expect(e, 'no webhook property').to.not.have.property('webhook');
  else expect(e.webhook).to.deep.equal(expected.webhook);
  if (expected.notification === undefined) expect(e, 'no notification property').to.not.have.property('notification');
  else expect(e.notification).to.deep.equal(expected.notification);
  if (expected.descendantKeyIds === undefined) expect(e, 'no descendantKeyIds property').to.not.have.property('descendantKeyIds');
  else expect(e.descendantKeyIds).to.deep.equal(expected.descendantKeyIds);
  if (expected.keyPolicy === undefined) expect(e, 'no keyPolicy property').to.not.have.property('keyPolicy');
  else expect(e.keyPolicy).to.deep.equal(expected.keyPolicy);
  if (expected.rateLimit === undefined) expect(e, 'no rateLimit property').to.not.have.property('rateLimit');
  else expect(e.rateLimit).to.deep.equal(expected.rateLimit);
  if (expected.changedFields === undefined) expect(e, 'no changedFields property').to.not.have.property('changedFields');
  else expect(e.changedFields).to.deep.equal(expected.changedFields);
  if (expected.allowedCidrs === undefined) expect(e, 'no allowedCidrs property').to.not.have.property('allowedCidrs');
  else expect(e.allowedCidrs).to.deep.equal(expected.allowedCidrs);
  expect(Object.keys(e).sort()).to.deep.equal(
    [
      'actor',
      'id',
      'keyId',
      'keyPrefix',
      'kind',
      'occurredAt',
      'organisationId',
      'seq',
      'prevHash',
      'hash',
      ...(expected.exposure !== undefined ? ['exposure'] : []),
      ...(expected.member !== undefined ? ['member'] : []),
      ...(expected.roll !== undefined ? ['roll'] : []),
      ...(expected.webhook !== undefined ? ['webhook'] : []),
      ...(expected.notification !== undefined ? ['notification'] : []),
      ...(expected.descendantKeyIds !== undefined ? ['descendantKeyIds'] : []),
      ...(expected.keyPolicy !== undefined ? ['keyPolicy'] : []),
      ...(expected.rateLimit !== undefined ? ['rateLimit'] : []),
      ...(expected.changedFields !== undefined ? ['changedFields'] : []),
      ...(expected.allowedCidrs !== undefined ? ['allowedCidrs'] : []),
    ].sort(),
    'no other fields',
  );
}

const ALL = { limit: 100, after: null } as const;

export function describeAuditLog(name: string, factory: StoreHarnessFactory): void {
  describe(`AuditLog contract: ${name}`, () => {
    let harness: StoreHarness;
    let orgA: string;
    let orgB: string;
    // Real keys, so a store may reference api_keys from its audit table.
    let keyA: ApiKey;
    let keyB: ApiKey;

    beforeEach(async () => {
      harness = await factory();
      const a = newOrganisation();
      const b = newOrganisation({ isSystem: true });
      await harness.stores.organisations.create(a);
      await harness.stores.organisations.create(b);
      orgA = a.id;
      orgB = b.id;
      keyA = newApiKey(orgA);
      keyB = newApiKey(orgB);
      await harness.stores.apiKeys.insert(keyA);
      await harness.stores.apiKeys.insert(keyB);
    });

    afterEach(async () => {
      await harness.close();
    });

    const audit = () => harness.stores.audit;

    it('C-40: round-trips a revocation entry with an api_key actor, at ms precision', async () => {
      const e = newAuditEntry(orgA, {
        kind: 'api_key_revoked',
        occurredAt: at(321),
        keyId: keyA.id,
        keyPrefix: keyA.keyPrefix,
        actor: { type: 'api_key', keyId: keyB.id },
      });
      await audit().append(e);
      const listed = await audit().list({}, ALL);
      expect(listed).to.have.length(1);
      expectAuditEntry(listed[0], e);
    });

    it('C-40, C-41: round-trips an operator actor and null key fields of an organisation event', async () => {
      const e = newAuditEntry(orgA, { kind: 'organisation_created', actor: { type: 'operator' }, occurredAt: at(-1) });
      await audit().append(e);
      expectAuditEntry((await audit().list({}, ALL))[0], e);
    });

    it('C-41, C-58: round-trips every kind', async () => {
      const entries = AUDIT_KINDS.map((kind, i) =>
        newAuditEntry(orgA, {
          kind,
          occurredAt: at(i),
          ...(kind.startsWith('api_key') ? { keyId: keyA.id, keyPrefix: keyA.keyPrefix } : {}),
        }),
      );
      for (const e of entries) await audit().append(e);
      const listed = await audit().list({}, ALL);
      expect(listed).to.have.length(AUDIT_KINDS.length);
      entries.forEach((e, i) => expectAuditEntry(listed[i], e));
    });

    it('C-58, C-63: round-trips member_added / member_removed with their member (by id only) and a named operator', async () => {
      const member = { id: randomUUID() };
      const added = newAuditEntry(orgA, { kind: 'member_added', occurredAt: at(10), actor: { type: 'operator', name: 'ada' }, member });
      const removed = newAuditEntry(orgA, { kind: 'member_removed', occurredAt: at(11), actor: { type: 'operator', name: 'grace hopper' }, member });
      await audit().append(added);
      await audit().append(removed);
      const listed = await audit().list({ organisationId: orgA }, ALL);
      expect(listed).to.have.length(2);
      expectAuditEntry(listed[0], added);
      expectAuditEntry(listed[1], removed);
      expectAuditEntry((await audit().list({ kind: 'member_removed' }, ALL))[0], removed);
    });

    it('C-61: an api_key_exposed entry round-trips its descendant key ids, an empty list included', async () => {
      const exposure = { type: 'cos_api_key', url: 'https://example.com/leak', source: 'content' };
      const withTwo = newAuditEntry(orgA, {
        kind: 'api_key_exposed',
        occurredAt: at(1),
        keyId: keyA.id,
        keyPrefix: keyA.keyPrefix,
        actor: { type: 'secret_scanning' },
        exposure,
        descendantKeyIds: [randomUUID(), randomUUID()].sort(),
      });
      const withNone = newAuditEntry(orgA, { kind: 'api_key_exposed', occurredAt: at(2), keyId: keyA.id, keyPrefix: keyA.keyPrefix, actor: { type: 'secret_scanning' }, exposure, descendantKeyIds: [] });
      await audit().append(withTwo);
      await audit().append(withNone);
      const listed = await audit().list({ organisationId: orgA }, ALL);
      expectAuditEntry(listed[0], withTwo);
      expectAuditEntry(listed[1], withNone);
    });

    it('C-62: an organisation_policy_updated entry round-trips the old and the new policy', async () => {
      const keyPolicy = {
        old: { maxLifetimeSeconds: null, allowedEnvironments: ['live', 'test'] as const, exposureResponse: 'revoke_key' as const },
        new: { maxLifetimeSeconds: 7_776_000, allowedEnvironments: ['live'] as const, exposureResponse: 'revoke_key_and_descendants' as const },
      };
      const e = newAuditEntry(orgA, { kind: 'organisation_policy_updated', occurredAt: at(3), actor: { type: 'api_key', keyId: keyB.id }, keyPolicy });
      await audit().append(e);
      expectAuditEntry((await audit().list({ kind: 'organisation_policy_updated' }, ALL))[0], e);
    });

    it('C-280: a policy entry keeps the expiry notice period where it has one, and none where it was written without', async () => {
      const keyPolicy = {
        old: { maxLifetimeSeconds: null, allowedEnvironments: ['live', 'test'] as const, exposureResponse: 'revoke_key' as const },
        new: { maxLifetimeSeconds: null, allowedEnvironments: ['live', 'test'] as const, exposureResponse: 'revoke_key' as const, expiryNoticeSeconds: 0 },
      };
      const e = newAuditEntry(orgA, { kind: 'organisation_policy_updated', occurredAt: at(3), actor: { type: 'operator' }, keyPolicy });
      await audit().append(e);
      const [listed] = await audit().list({ kind: 'organisation_policy_updated' }, ALL);
      expectAuditEntry(listed, e);
      expect(listed?.keyPolicy?.old, 'no expiryNoticeSeconds property').to.not.have.property('expiryNoticeSeconds');
      expect(listed?.keyPolicy?.new.expiryNoticeSeconds).to.equal(0);
    });

    it('C-241: organisation_rate_limit_changed entries round-trip the old and the new limit, null (the default) on either side', async () => {
      const raised = newAuditEntry(orgA, { kind: 'organisation_rate_limit_changed', occurredAt: at(3), actor: { type: 'api_key', keyId: keyB.id }, rateLimit: { old: null, new: 1_000_000 } });
      const lowered = newAuditEntry(orgA, { kind: 'organisation_rate_limit_changed', occurredAt: at(4), actor: { type: 'operator', name: 'ops' }, rateLimit: { old: 1_000_000, new: 1 } });
      const reset = newAuditEntry(orgA, { kind: 'organisation_rate_limit_changed', occurredAt: at(5), actor: { type: 'operator' }, rateLimit: { old: 1, new: null } });
      for (const e of [raised, lowered, reset]) await audit().append(e);
      const listed = await audit().list({ kind: 'organisation_rate_limit_changed' }, ALL);
      expect(listed).to.have.length(3);
      expectAuditEntry(listed[0], raised);
      expectAuditEntry(listed[1], lowered);
      expectAuditEntry(listed[2], reset);
      const chain = await audit().chain(orgA, { afterSeq: 0, limit: 100 });
      expect(chain.map((c) => c.id)).to.deep.equal([raised.id, lowered.id, reset.id]);
    });

    it('C-265: api_key_updated entries round-trip their changed fields and networks (a list, or null when lifted); api_key_issued its networks', async () => {
      const key = { keyId: keyA.id, keyPrefix: keyA.keyPrefix, actor: { type: 'operator' as const } };
      const restricted = newAuditEntry(orgA, { kind: 'api_key_updated', occurredAt: at(1), ...key, changedFields: ['allowed_cidrs', 'label'], allowedCidrs: ['10.0.0.0/8', '2001:db8::/32'] });
      const lifted = newAuditEntry(orgA, { kind: 'api_key_updated', occurredAt: at(2), ...key, changedFields: ['allowed_cidrs'], allowedCidrs: null });
      const labelled = newAuditEntry(orgA, { kind: 'api_key_updated', occurredAt: at(3), ...key, changedFields: ['label', 'metadata'] });
      const issued = newAuditEntry(orgA, { kind: 'api_key_issued', occurredAt: at(4), ...key, allowedCidrs: ['192.0.2.0/24'] });
      for (const e of [restricted, lifted, labelled, issued]) await audit().append(e);
      const listed = await audit().list({ organisationId: orgA }, ALL);
      expect(listed).to.have.length(4);
      [restricted, lifted, labelled, issued].forEach((e, i) => expectAuditEntry(listed[i], e));
      expect((await audit().list({ kind: 'api_key_updated' }, ALL)).map((e) => e.id)).to.deep.equal([restricted.id, lifted.id, labelled.id]);
    });

    it('an operator without a name round-trips without a name property; a name never appears on another actor', async () => {
      const unnamed = newAuditEntry(orgA, { kind: 'organisation_updated', occurredAt: at(1), actor: { type: 'operator' } });
      const byKey = newAuditEntry(orgA, { kind: 'api_key_revoked', occurredAt: at(2), keyId: keyA.id, keyPrefix: keyA.keyPrefix, actor: { type: 'api_key', keyId: keyB.id } });
      await audit().append(unnamed);
      await audit().append(byKey);
      const listed = await audit().list({}, ALL);
      expect(listed[0]!.actor).to.deep.equal({ type: 'operator' });
      expect(Object.keys(listed[0]!.actor)).to.deep.equal(['type']);
      expect(listed[1]!.actor).to.deep.equal({ type: 'api_key', keyId: keyB.id });
      for (const e of listed) expect(e, 'no member property').to.not.have.property('member');
    });

    it('C-58: round-trips an api_key_exposed entry with its exposure and the secret_scanning actor', async () => {
      const e = newAuditEntry(orgA, {
        kind: 'api_key_exposed',
        occurredAt: at(654),
        keyId: keyA.id,
        keyPrefix: keyA.keyPrefix,
        actor: { type: 'secret_scanning' },
        exposure: { type: 'cos_api_key', url: 'https://github.com/acme/app/blob/1a2b/.env#L3', source: 'content' },
      });
      await audit().append(e);
      const listed = await audit().list({}, ALL);
      expect(listed).to.have.length(1);
      expectAuditEntry(listed[0], e);
      expect(listed[0]!.actor).to.deep.equal({ type: 'secret_scanning' });
    });

    it('C-58: round-trips an api_key_rolled entry with its roll (new key id, grace); other entries have no roll property', async () => {
      const rolled = newAuditEntry(orgA, {
        kind: 'api_key_rolled',
        occurredAt: at(655),
        keyId: keyA.id,
        keyPrefix: keyA.keyPrefix,
        actor: { type: 'api_key', keyId: keyA.id },
        roll: { toKeyId: '5d8f3a2e-1b4c-4d6e-9f0a-1b2c3d4e5f60', gracePeriodSeconds: 604_800 },
      });
      const immediate = newAuditEntry(orgA, { ...rolled, id: randomUUID(), occurredAt: at(656), roll: { toKeyId: keyA.id, gracePeriodSeconds: 0 } });
      const revoked = newAuditEntry(orgA, { kind: 'api_key_revoked', keyId: keyA.id, keyPrefix: keyA.keyPrefix, occurredAt: at(657) });
      for (const e of [rolled, immediate, revoked]) await audit().append(e);
      const listed = await audit().list({}, ALL);
      expect(listed).to.have.length(3);
      expectAuditEntry(listed[0], rolled);
      expectAuditEntry(listed[1], immediate);
      expectAuditEntry(listed[2], revoked);
      expect((await audit().list({ kind: 'api_key_rolled' }, ALL)).map((e) => e.id)).to.deep.equal([rolled.id, immediate.id]);
    });

    it('C-58: round-trips the webhook kinds with their endpoint origin and notification_retried with its notification, each with a named operator', async () => {
      const operator = { type: 'operator' as const, name: 'alice' };
      const set = newAuditEntry(orgA, { kind: 'webhook_endpoint_set', occurredAt: at(1), actor: operator, webhook: { origin: 'https://hooks.acme.example' } });
      const rotated = newAuditEntry(orgA, { kind: 'webhook_secret_rotated', occurredAt: at(2), actor: operator, webhook: { origin: 'https://hooks.acme.example:8443' } });
      const removed = newAuditEntry(orgA, { kind: 'webhook_endpoint_removed', occurredAt: at(3), actor: { type: 'operator' }, webhook: { origin: 'http://[::1]:9000' } });
      const retried = newAuditEntry(orgB, {
        kind: 'notification_retried',
        occurredAt: at(4),
        actor: operator,
        notification: { id: randomUUID(), type: 'api_key.exposed' },
      });
      for (const e of [set, rotated, removed, retried]) await audit().append(e);
      const listed = await audit().list({}, ALL);
      [set, rotated, removed, retried].forEach((e, i) => expectAuditEntry(listed[i], e));
      expectAuditEntry((await audit().list({ kind: 'notification_retried' }, ALL))[0], retried);
      expect((await audit().list({ organisationId: orgA, kind: 'webhook_secret_rotated' }, ALL)).map((e) => e.id)).to.deep.equal([rotated.id]);
    });

    it('C-58: an exposure without url and source keeps both as null', async () => {
      const e = newAuditEntry(orgA, {
        kind: 'api_key_exposed',
        keyId: keyA.id,
        keyPrefix: keyA.keyPrefix,
        actor: { type: 'secret_scanning' },
        exposure: { type: 'cos_api_key', url: null, source: null },
      });
      await audit().append(e);
      expectAuditEntry((await audit().list({ kind: 'api_key_exposed' }, ALL))[0], e);
    });

    it('C-41, C-58: entries without an exposure have no exposure property at all (not even undefined or null)', async () => {
      const revoked = newAuditEntry(orgA, { kind: 'api_key_revoked', keyId: keyA.id, keyPrefix: keyA.keyPrefix, occurredAt: at(1), actor: { type: 'secret_scanning' } });
      const updated = newAuditEntry(orgA, { kind: 'organisation_updated', occurredAt: at(2) });
      await audit().append(revoked);
      await audit().append(updated);
      const listed = await audit().list({}, ALL);
      expect(listed).to.have.length(2);
      for (const e of listed) expect(Object.prototype.hasOwnProperty.call(e, 'exposure'), `${e.kind} has no exposure`).to.equal(false);
      expectAuditEntry(listed[0], revoked);
      expectAuditEntry(listed[1], updated);
    });

    it('C-41: entries are listed oldest first, all organisations when unfiltered', async () => {
      const b = newAuditEntry(orgB, { occurredAt: at(2) });
      const a1 = newAuditEntry(orgA, { occurredAt: at(1) });
      const a3 = newAuditEntry(orgA, { occurredAt: at(3) });
      for (const e of [a3, b, a1]) await audit().append(e);
      expect((await audit().list({}, ALL)).map((e) => e.id)).to.deep.equal([a1.id, b.id, a3.id]);
    });

    it('C-41: filters by organisation, by kind, and by both', async () => {
      const aRevoked = newAuditEntry(orgA, { kind: 'api_key_revoked', occurredAt: at(0), keyId: keyA.id, keyPrefix: keyA.keyPrefix });
      const aUpdated = newAuditEntry(orgA, { kind: 'organisation_updated', occurredAt: at(1) });
      const bRevoked = newAuditEntry(orgB, { kind: 'api_key_revoked', occurredAt: at(2), keyId: keyB.id, keyPrefix: keyB.keyPrefix });
      const bIssued = newAuditEntry(orgB, { kind: 'api_key_issued', occurredAt: at(3), keyId: keyB.id, keyPrefix: keyB.keyPrefix });
      for (const e of [aRevoked, aUpdated, bRevoked, bIssued]) await audit().append(e);
      const ids = async (filter: Parameters<ReturnType<typeof audit>['list']>[0]) =>
        (await audit().list(filter, ALL)).map((e) => e.id);
      expect(await ids({ organisationId: orgA })).to.deep.equal([aRevoked.id, aUpdated.id]);
      expect(await ids({ organisationId: orgB })).to.deep.equal([bRevoked.id, bIssued.id]);
      expect(await ids({ kind: 'api_key_revoked' })).to.deep.equal([aRevoked.id, bRevoked.id]);
      expect(await ids({ organisationId: orgB, kind: 'api_key_revoked' })).to.deep.equal([bRevoked.id]);
      expect(await ids({ organisationId: orgA, kind: 'api_key_issued' })).to.deep.equal([]);
      expect(await ids({ kind: 'organisation_created' })).to.deep.equal([]);
      expect(await ids({ organisationId: '7c9e6679-7425-40de-944b-e07fc1f90ae7' })).to.deep.equal([]);
      expect(await ids({})).to.deep.equal([aRevoked.id, aUpdated.id, bRevoked.id, bIssued.id]);
    });

    it('C-6: filters and keyset paging combine (pages of a filtered list skip nothing)', async () => {
      const ids = ascendingIds(8);
      const entries = ids.map((id, i) =>
        newAuditEntry(i % 2 === 0 ? orgA : orgB, {
          id,
          kind: i % 4 < 2 ? 'api_key_revoked' : 'organisation_updated',
          occurredAt: at(i < 4 ? 0 : i),
          ...(i % 4 < 2 ? { keyId: (i % 2 === 0 ? keyA : keyB).id, keyPrefix: 'svc_live_pgn' } : {}),
        }),
      );
      for (const e of [...entries].reverse()) await audit().append(e);
      const expectedA = entries.filter((e) => e.organisationId === orgA).map((e) => e.id);
      const seen: string[] = [];
      let after: { createdAt: Date; id: string } | null = null;
      for (let pages = 0; ; pages++) {
        expect(pages, 'paging terminates').to.be.below(entries.length + 1);
        const page: AuditEntry[] = await audit().list({ organisationId: orgA }, { limit: 1, after });
        if (page.length === 0) break;
        const last: AuditEntry = page[0]!;
        seen.push(last.id);
        after = { createdAt: last.occurredAt, id: last.id };
      }
      expect(seen).to.deep.equal(expectedA);
      const revokedOfB = entries.filter((e) => e.organisationId === orgB && e.kind === 'api_key_revoked');
      const firstPage = await audit().list({ organisationId: orgB, kind: 'api_key_revoked' }, { limit: 1, after: null });
      expect(firstPage.map((e) => e.id)).to.deep.equal([revokedOfB[0]!.id]);
      const rest = await audit().list(
        { organisationId: orgB, kind: 'api_key_revoked' },
        { limit: 10, after: { createdAt: firstPage[0]!.occurredAt, id: firstPage[0]!.id } },
      );
      expect(rest.map((e) => e.id)).to.deep.equal(revokedOfB.slice(1).map((e) => e.id));
    });

    it('C-6, C-41: a listing by any kind, across organisations or in one, followed page by page through its cursors, is exactly that kind\'s entries in (occurredAt, id) order', async () => {
      // The two kinds every issuance and revocation writes are dense, every other kind sparse; instants
      // repeat (ties ordered by id) and entries are appended out of order.
      const kinds = AUDIT_KINDS.flatMap((kind) => Array.from({ length: kind === 'api_key_issued' || kind === 'api_key_revoked' ? 12 : 3 }, () => kind));
      const entries = kinds.map((kind, i) =>
        newAuditEntry(i % 2 === 0 ? orgA : orgB, {
          kind,
          occurredAt: at((i * 7) % 11),
          ...(kind.startsWith('api_key_') ? { keyId: (i % 2 === 0 ? keyA : keyB).id, keyPrefix: 'svc_live_knd' } : {}),
        }),
      );
      for (const e of [...entries].reverse()) await audit().append(e);
      const byPosition = (a: AuditEntry, b: AuditEntry): number =>
        a.occurredAt.getTime() - b.occurredAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
      const walk = async (filter: { organisationId?: string; kind: AuditEntry['kind'] }): Promise<string[]> => {
        const seen: string[] = [];
        let after: { createdAt: Date; id: string } | null = null;
        for (let pages = 0; ; pages++) {
          expect(pages, 'paging terminates').to.be.below(entries.length + 1);
          const page: AuditEntry[] = await audit().list(filter, { limit: 2, after });
          seen.push(...page.map((e) => e.id));
          if (page.length < 2) return seen;
          after = { createdAt: page[1]!.occurredAt, id: page[1]!.id };
        }
      };
      for (const kind of AUDIT_KINDS) {
        const ofKind = entries.filter((e) => e.kind === kind).sort(byPosition);
        expect(await walk({ kind }), kind).to.deep.equal(ofKind.map((e) => e.id));
        const ofKindInA = ofKind.filter((e) => e.organisationId === orgA);
        expect(await walk({ organisationId: orgA, kind }), `${kind} of one organisation`).to.deep.equal(ofKindInA.map((e) => e.id));
      }
    });

    it('C-41: append-only: identical content under new ids is kept twice, nothing is replaced', async () => {
      const first = newAuditEntry(orgA, { kind: 'api_key_revoked', keyId: keyA.id, keyPrefix: keyA.keyPrefix, occurredAt: at(5) });
      const second = { ...first, id: randomUUID() };
      await audit().append(first);
      await audit().append(second);
      const listed = await audit().list({}, ALL);
      expect(listed.map((e) => e.id).sort()).to.deep.equal([first.id, second.id].sort());
    });

    it('C-41: the AuditLog offers no way to update or delete an entry', () => {
      const log = audit() as unknown as Record<string, unknown>;
      for (const method of ['update', 'delete', 'remove', 'clear', 'truncate', 'set', 'replace']) {
        expect(typeof log[method], `AuditLog.${method}`).to.equal('undefined');
      }
      expect(typeof log['append']).to.equal('function');
      expect(typeof log['list']).to.equal('function');
    });

    it('returns copies: mutating a listed entry or the appended input changes nothing stored', async () => {
      const input = newAuditEntry(orgA, { actor: { type: 'api_key', keyId: keyB.id }, occurredAt: at(8) });
      const original: AuditEntry = { ...input, occurredAt: new Date(input.occurredAt), actor: { ...input.actor } };
      await audit().append(input);
      (input as { kind: string }).kind = 'api_key_issued';
      input.occurredAt.setTime(0);
      (input.actor as { keyId: string }).keyId = 'mutated';
      const [listed] = await audit().list({}, ALL);
      expectAuditEntry(listed, original);
      (listed!.actor as { type: string }).type = 'operator';
      listed!.occurredAt.setTime(1);
      expectAuditEntry((await audit().list({}, ALL))[0], original);
    });
  });

  describe(`AuditLog chain contract: ${name}`, () => {
    let harness: StoreHarness;
    let orgA: string;
    let orgB: string;

    beforeEach(async () => {
      harness = await factory();
      const a = newOrganisation();
      const b = newOrganisation();
      await harness.stores.organisations.create(a);
      await harness.stores.organisations.create(b);
      orgA = a.id;
      orgB = b.id;
    });

    afterEach(async () => {
      await harness.close();
    });

    const audit = () => harness.stores.audit;
    const wholeChain = async (org: string): Promise<ChainedAuditEntry[]> => {
      const out: ChainedAuditEntry[] = [];
      for (;;) {
        const page = await audit().chain(org, { afterSeq: out.length === 0 ? 0 : out[out.length - 1]!.seq, limit: 7 });
        if (page.length === 0) return out;
        out.push(...page);
      }
    };
    const verify = (org: string, entries: readonly ChainedAuditEntry[]) => {
      const v = new ChainVerifier(org);
      for (const e of entries) v.push(auditRecord(e) as never);
      return v.finish();
    };

    it('C-120: every entry written through append is a link of its chain: none is outside it, for every organisation or one', async () => {
      for (let i = 0; i < 4; i++) await audit().append(newAuditEntry(i % 2 === 0 ? orgA : orgB, { occurredAt: at(i) }));
      await harness.unitOfWork.run(async (stores) => {
        await stores.audit.append(newAuditEntry(orgA, { occurredAt: at(9) }));
      });
      expect(await audit().outsideChain()).to.deep.equal([]);
      expect(await audit().outsideChain(orgA)).to.deep.equal([]);
      expect((await wholeChain(orgA)).map((e) => e.seq)).to.deep.equal([1, 2, 3]);
      expect((await audit().list({}, { limit: 100, after: null })).map((e) => e.seq).sort()).to.deep.equal([1, 1, 2, 2, 3]);
    });

    it('C-63: each organisation has its own chain: seq 1, 2, 3 …, prev_hash the previous hash (64 zeros first), hash recomputable', async () => {
      const appended: ChainedAuditEntry[] = [];
      for (let i = 0; i < 5; i++) {
        appended.push(await audit().append(newAuditEntry(orgA, { occurredAt: at(i) })));
        appended.push(await audit().append(newAuditEntry(orgB, { occurredAt: at(i), actor: { type: 'operator', name: `op ${i}` } })));
      }
      for (const org of [orgA, orgB]) {
        const chain = await wholeChain(org);
        expect(chain.map((e) => e.seq)).to.deep.equal([1, 2, 3, 4, 5]);
        expect(chain[0]!.prevHash).to.equal(GENESIS_HASH);
        chain.forEach((e, i) => {
          expect(e.hash).to.match(/^[0-9a-f]{64}$/);
          expect(entryHash(e), `seq ${e.seq} recomputes`).to.equal(e.hash);
          if (i > 0) expect(e.prevHash).to.equal(chain[i - 1]!.hash);
        });
        expect(chain).to.deep.equal(appended.filter((e) => e.organisationId === org), 'append returns the entry as stored');
        expect(verify(org, chain).status).to.equal('ok');
      }
      expect(await audit().heads()).to.deep.equal(
        [orgA, orgB].sort().map((org) => {
          const last = appended.filter((e) => e.organisationId === org).pop()!;
          return { organisationId: org, seq: 5, hash: last.hash };
        }),
      );
    });

    it('C-63: the chain is in append order, whatever the occurred_at of the entries', async () => {
      const late = await audit().append(newAuditEntry(orgA, { occurredAt: at(30) }));
      const early = await audit().append(newAuditEntry(orgA, { occurredAt: at(10) }));
      expect([late.seq, early.seq]).to.deep.equal([1, 2]);
      expect((await wholeChain(orgA)).map((e) => e.id)).to.deep.equal([late.id, early.id]);
      expect((await audit().list({ organisationId: orgA }, ALL)).map((e) => e.id)).to.deep.equal([early.id, late.id]);
    });

    it('C-63: a unit of work links after the committed head; one that rolls back leaves no seq behind (no gap)', async () => {
      await audit().append(newAuditEntry(orgA));
      await harness.unitOfWork
        .run(async (stores) => {
          const e = await stores.audit.append(newAuditEntry(orgA));
          expect(e.seq).to.equal(2);
          throw new Error('roll back');
        })
        .catch(() => undefined);
      const inWork = await harness.unitOfWork.run(async (stores) => {
        const one = await stores.audit.append(newAuditEntry(orgA));
        const two = await stores.audit.append(newAuditEntry(orgA));
        return [one, two];
      });
      expect(inWork.map((e) => e.seq)).to.deep.equal([2, 3]);
      const chain = await wholeChain(orgA);
      expect(chain.map((e) => e.seq)).to.deep.equal([1, 2, 3]);
      expect(chain.map((e) => e.hash)).to.deep.equal([chain[0]!.hash, ...inWork.map((e) => e.hash)]);
      expect(verify(orgA, chain).status).to.equal('ok');
    });

    it('C-63: concurrent appends to one organisation (units of work and single appends) never fork or reuse a seq', async () => {
      const writes: Array<Promise<unknown>> = [];
      for (let i = 0; i < 12; i++) {
        writes.push(harness.unitOfWork.run((stores) => stores.audit.append(newAuditEntry(orgA, { occurredAt: at(i) }))));
        writes.push(audit().append(newAuditEntry(orgA, { occurredAt: at(i) })));
      }
      await Promise.all(writes);
      const chain = await wholeChain(orgA);
      expect(chain.map((e) => e.seq)).to.deep.equal(Array.from({ length: 24 }, (_, i) => i + 1));
      expect(verify(orgA, chain)).to.include({ status: 'ok', entries: 24 });
    });

    it('C-63: chain() pages by seq and filters by kind, since (inclusive) and until (exclusive); heads() is empty without entries', async () => {
      expect(await audit().heads()).to.deep.equal([]);
      const kinds = ['organisation_updated', 'organisation_created', 'organisation_updated', 'member_added', 'organisation_updated'] as const;
      for (const [i, kind] of kinds.entries()) await audit().append(newAuditEntry(orgA, { kind, occurredAt: at(i * 10) }));
      await audit().append(newAuditEntry(orgB, { occurredAt: at(15) }));
      const seqs = async (q: Parameters<ReturnType<typeof audit>['chain']>[1]) => (await audit().chain(orgA, q)).map((e) => e.seq);
      expect(await seqs({ afterSeq: 0, limit: 2 })).to.deep.equal([1, 2]);
      expect(await seqs({ afterSeq: 2, limit: 2 })).to.deep.equal([3, 4]);
      expect(await seqs({ afterSeq: 4, limit: 2 })).to.deep.equal([5]);
      expect(await seqs({ afterSeq: 0, limit: 10, kind: 'organisation_updated' })).to.deep.equal([1, 3, 5]);
      expect(await seqs({ afterSeq: 1, limit: 10, kind: 'organisation_updated' })).to.deep.equal([3, 5]);
      expect(await seqs({ afterSeq: 0, limit: 10, since: at(10), until: at(30) })).to.deep.equal([2, 3]);
      expect(await seqs({ afterSeq: 0, limit: 10, since: at(41) })).to.deep.equal([]);
      expect((await audit().chain(orgB, { afterSeq: 0, limit: 10 })).map((e) => e.seq)).to.deep.equal([1]);
      expect((await audit().heads()).map((h) => [h.organisationId, h.seq])).to.deep.equal(
        [
          [orgA, 5],
          [orgB, 1],
        ].sort((x, y) => ((x[0] as string) < (y[0] as string) ? -1 : 1)),
      );
    });
  });

  describeKeysetPaging(`AuditLog contract: ${name}`, factory, async (harness) => {
    const org = newOrganisation();
    const other = newOrganisation();
    await harness.stores.organisations.create(org);
    await harness.stores.organisations.create(other);
    await harness.stores.audit.append(newAuditEntry(other.id, { occurredAt: at(1) }));
    return {
      insert: async (occurredAt, id) => {
        await harness.stores.audit.append(newAuditEntry(org.id, { id, occurredAt }));
      },
      list: async (page) =>
        (await harness.stores.audit.list({ organisationId: org.id }, page)).map((e) => ({ createdAt: e.occurredAt, id: e.id })),
    };
  });
}
