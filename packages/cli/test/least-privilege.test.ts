/**
 * Scoped keys, lineage and key policies (C-60..C-62) through `cos-admin` (run in process) on SQLite
 * and Postgres: `key issue --scopes`, `key roll --scopes`, the SCOPES column and `scopes` in every
 * --json key record, `key list --created-by [--transitive]`, `org policy show|set` and
 * `key list --exceeding-policy`. Keys issued by keys (which only HTTP callers make) are issued
 * through a core over the same database.
 */
import { expect } from 'chai';
import { ALL_BUILTIN_SCOPES, createCore, InProcessRateCounter, OPERATOR, type Core, type KeyPrincipal } from '@cos/core';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import { type KeyView } from './support/cli.js';
import { databaseTargets, suiteDatabase } from './support/databases.js';

for (const target of databaseTargets()) {
  describe(`cos-admin least privilege on ${target.name} (C-60, C-61, C-62)`, function () {
    this.timeout(90_000);
    const suite = suiteDatabase(target);
    let orgId: string;
    let store: SqlStore;
    let core: Core;

    before(async () => {
      await suite.json('migrate');
      orgId = (await suite.json<{ id: string }>('org', 'create', '--name', 'Acme', '--slug', 'acme')).id;
      store = createSqlStore({ databaseUrl: suite.db.databaseUrl });
      core = createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter: new InProcessRateCounter() });
    });
    after(async () => {
      await store?.close();
    });

    const keyListOf = async (org: string, ...args: string[]): Promise<KeyView[]> => (await suite.json<{ data: KeyView[] }>('key', 'list', org, ...args)).data;
    const keyList = (...args: string[]): Promise<KeyView[]> => keyListOf(orgId, ...args);
    const principalOf = (raw: string): Promise<KeyPrincipal> => core.authenticator.authenticate(`Bearer ${raw}`);

    it('C-60: key issue --scopes and key roll --scopes; scopes in every --json record; a SCOPES column in key list; bad scopes are refused', async () => {
      const issued = await suite.json<KeyView>('key', 'issue', orgId, '--label', 'ci', '--scopes', 'organisations:read, api_keys:read');
      expect(issued.scopes).to.deep.equal(['api_keys:read', 'organisations:read']);
      expect(issued.created_by_key_id).to.equal(null);
      const all = await suite.json<KeyView>('key', 'issue', orgId, '--label', 'all');
      expect(all.scopes, 'the operator default: all eight').to.deep.equal([...ALL_BUILTIN_SCOPES]);
      const rolled = await suite.json<KeyView>('key', 'roll', orgId, issued.id, '--scopes', 'organisations:read');
      expect(rolled).to.deep.include({ scopes: ['organisations:read'], rolled_from: issued.id });
      const kept = await suite.json<KeyView>('key', 'roll', orgId, rolled.id);
      expect(kept.scopes).to.deep.equal(['organisations:read']);
      const listed = await keyList('--all');
      expect(listed.find((k) => k.id === kept.id)?.scopes).to.deep.equal(['organisations:read']);
      const table = await suite.cli('key', 'list', orgId);
      expect(table.stdout).to.match(/SCOPES/);
      expect(table.stdout).to.include('api_keys:read,api_keys:write,audit:read');
      const shown = await suite.cli('key', 'revoke', orgId, all.id);
      expect(shown.stdout).to.match(/scopes:\s+api_keys:read, api_keys:write/);
      for (const bad of ['organisations:delete', 'members:read,members:read', ',']) {
        const refused = await suite.cli('key', 'issue', orgId, '--label', 'bad', '--scopes', bad);
        expect(refused.code, bad).to.not.equal(0);
        expect(refused.stderr, bad).to.include('--scopes: must be a non-empty array of known scopes without duplicates');
      }
    });

    it('C-61: key list --created-by lists the keys a key issued or rolled; --transitive their descendants too', async () => {
      const root = await core.apiKeys.issue({ kind: 'operator' }, orgId, { label: 'root' });
      const rootPrincipal = await principalOf(root.rawKey);
      const child = await core.apiKeys.issue(rootPrincipal, orgId, { label: 'child' });
      const grandchild = await core.apiKeys.issue(await principalOf(child.rawKey), orgId, { label: 'grandchild' });
      const rolled = await core.apiKeys.roll(rootPrincipal, orgId, grandchild.key.id, {});
      const direct = await keyList('--created-by', root.key.id);
      expect(direct.map((k) => k.id).sort()).to.deep.equal([child.key.id, rolled.key.id].sort());
      expect(direct.every((k) => k.created_by_key_id === root.key.id)).to.equal(true);
      const transitive = await keyList('--created-by', root.key.id, '--transitive');
      expect(transitive.map((k) => k.id).sort()).to.deep.equal([child.key.id, grandchild.key.id, rolled.key.id].sort());
      expect(await keyList('--created-by', grandchild.key.id)).to.deep.equal([]);
      const usage = await suite.cli('key', 'list', orgId, '--transitive');
      expect(usage.code).to.not.equal(0);
      expect(usage.stderr).to.include('--transitive needs --created-by');
    });

    it("C-61, C-100: key list --created-by --transitive follows the lineage through keys of other organisations: P2 issued P3 in the system organisation, P3 issued KB here, KB issued KB2", async () => {
      const system = (await suite.json<{ id: string }>('org', 'create', '--name', 'Platform', '--slug', 'platform-lineage', '--system')).id;
      const p2 = await core.apiKeys.issue({ kind: 'operator' }, system, { label: 'p2' });
      const p3 = await core.apiKeys.issue(await principalOf(p2.rawKey), system, { label: 'p3' });
      const kb = await core.apiKeys.issue(await principalOf(p3.rawKey), orgId, { label: 'kb' });
      const kb2 = await core.apiKeys.issue(await principalOf(kb.rawKey), orgId, { label: 'kb2' });
      expect((await keyList('--created-by', p2.key.id, '--transitive')).map((k) => k.id).sort()).to.deep.equal([kb.key.id, kb2.key.id].sort());
      expect(await keyList('--created-by', p2.key.id), "P2's own children are in the system organisation").to.deep.equal([]);
      expect((await keyList('--created-by', p3.key.id)).map((k) => k.id)).to.deep.equal([kb.key.id]);
    });

    it('C-62: org policy show answers the default; org policy set changes only what it is given, audited; key list --exceeding-policy lists the keys that would not be issued today', async () => {
      const policyOrg = (await suite.json<{ id: string }>('org', 'create', '--name', 'Policy', '--slug', 'policy')).id;
      const forever = await suite.json<KeyView>('key', 'issue', policyOrg, '--label', 'forever');
      const testKey = await suite.json<KeyView>('key', 'issue', policyOrg, '--label', 'test', '--test', '--expires-in', '1d');
      const soon = await suite.json<KeyView>('key', 'issue', policyOrg, '--label', 'soon', '--expires-in', '12h');
      expect(await suite.json('org', 'policy', 'show', policyOrg)).to.deep.equal({
        max_lifetime_seconds: null,
        allowed_environments: ['live', 'test'],
        exposure_response: 'revoke_key',
        expiry_notice_seconds: 604_800,
      });
      expect(await suite.json('org', 'policy', 'set', policyOrg, '--max-lifetime', '1d', '--environments', 'live')).to.deep.equal({
        max_lifetime_seconds: 86_400,
        allowed_environments: ['live'],
        exposure_response: 'revoke_key',
        expiry_notice_seconds: 604_800,
      });
      expect(await suite.json('org', 'policy', 'set', policyOrg, '--exposure-response', 'revoke_key_and_descendants')).to.deep.equal({
        max_lifetime_seconds: 86_400,
        allowed_environments: ['live'],
        exposure_response: 'revoke_key_and_descendants',
        expiry_notice_seconds: 604_800,
      });
      const human = await suite.cli('org', 'policy', 'show', policyOrg);
      expect(human.stdout).to.match(/max lifetime:\s+86400 s \(1d\)/);
      const exceeding = await suite.json<{ data: KeyView[] }>('key', 'list', policyOrg, '--exceeding-policy');
      expect(exceeding.data.map((k) => k.id).sort()).to.deep.equal([forever.id, testKey.id].sort());
      expect(exceeding.data.map((k) => k.id)).to.not.include(soon.id);
      const entries = await suite.json<{ data: Array<{ kind: string; key_policy?: { old: unknown; new: unknown } }> }>(
        'audit', 'list', '--org', policyOrg, '--kind', 'organisation_policy_updated',
      );
      expect(entries.data).to.have.length(2);
      expect(entries.data.map((e) => e.key_policy?.new)).to.deep.include({
        max_lifetime_seconds: 86_400,
        allowed_environments: ['live'],
        exposure_response: 'revoke_key',
        expiry_notice_seconds: 604_800,
      });
      // C-161: the refusal names the flag typed and the bound that refused it (the policy: no key issued it).
      const refused = await suite.cli('key', 'issue', policyOrg, '--label', 'too long', '--expires-in', '2d');
      expect(refused.code, refused.stderr).to.equal(2);
      expect(refused.stderr).to.match(
        /^cos-admin: invalid input: --expires-in: must not be later than \d{4}-\d\d-\d\dT[\d:.]+Z \(the organisation's maximum key lifetime, 1d\)\n$/,
      );
      const refusedAt = await suite.cli('key', 'issue', policyOrg, '--label', 'too long', '--expires-at', '2099-01-01', '--json');
      expect(refusedAt.code, refusedAt.stderr).to.equal(2);
      expect(JSON.parse(refusedAt.stderr).message).to.match(/^invalid input: --expires-at: must not be later than .* \(the organisation's maximum key lifetime, 1d\)$/);
      // As the README says: a roll keeps the expiry, capped by the maximum lifetime, so a key that never expired now does.
      const before = Date.now();
      const rolled = await suite.json<KeyView>('key', 'roll', policyOrg, forever.id, '--grace', '1h');
      expect(forever.expires_at).to.equal(null);
      expect(Date.parse(rolled.expires_at as string)).to.be.within(before + 86_400_000, Date.now() + 86_400_000);
      const none = await suite.json('org', 'policy', 'set', policyOrg, '--max-lifetime', 'none');
      expect(none).to.include({ max_lifetime_seconds: null });
      const nothing = await suite.cli('org', 'policy', 'set', policyOrg);
      expect(nothing.code).to.not.equal(0);
      expect(nothing.stderr).to.include('nothing to change');
      const tooShort = await suite.cli('org', 'policy', 'set', policyOrg, '--max-lifetime', '30m');
      expect(tooShort.code).to.equal(2);
      expect(tooShort.stderr).to.include("option '--max-lifetime <duration>' argument '30m' is invalid. It must be at least 1h.");
    });

    it('C-280, C-283: org policy set --expiry-notice (0: off, at most 90d) keeps the rest; key list --expiring-within lists the active keys expiring that soon, the same as the API\'s ISO 8601 spelling of that duration', async () => {
      const noticeOrg = (await suite.json<{ id: string }>('org', 'create', '--name', 'Notices', '--slug', 'notices')).id;
      const week = await suite.json<KeyView>('key', 'issue', noticeOrg, '--label', 'week', '--expires-in', '6d');
      const month = await suite.json<KeyView>('key', 'issue', noticeOrg, '--label', 'month', '--expires-in', '30d');
      await suite.json<KeyView>('key', 'issue', noticeOrg, '--label', 'forever');
      expect(await suite.json('org', 'policy', 'set', noticeOrg, '--expiry-notice', '14d')).to.deep.equal({
        max_lifetime_seconds: null,
        allowed_environments: ['live', 'test'],
        exposure_response: 'revoke_key',
        expiry_notice_seconds: 14 * 86_400,
      });
      expect(await suite.json('org', 'policy', 'set', noticeOrg, '--max-lifetime', '90d')).to.include({ expiry_notice_seconds: 14 * 86_400 });
      expect(await suite.json('org', 'policy', 'set', noticeOrg, '--expiry-notice', '0')).to.include({ expiry_notice_seconds: 0 });
      expect((await suite.cli('org', 'policy', 'show', noticeOrg)).stdout).to.match(/expiry notice:\s+off/);
      expect(await suite.json('org', 'policy', 'set', noticeOrg, '--expiry-notice', '1w')).to.include({ expiry_notice_seconds: 604_800 });
      expect((await suite.cli('org', 'policy', 'show', noticeOrg)).stdout).to.match(/expiry notice:\s+604800 s \(7d\) before a key expires/);
      for (const bad of ['91d', '7', '1.5d', 'P7D']) {
        const refused = await suite.cli('org', 'policy', 'set', noticeOrg, '--expiry-notice', bad);
        expect(refused.code, bad).to.equal(2);
        expect(refused.stderr, bad).to.include(`option '--expiry-notice <duration>' argument '${bad}' is invalid.`);
      }

      expect((await keyListOf(noticeOrg, '--expiring-within', '7d')).map((k) => k.id)).to.deep.equal([week.id]);
      expect((await keyListOf(noticeOrg, '--expiring-within', '31d')).map((k) => k.id)).to.deep.equal([week.id, month.id]);
      expect(await keyListOf(noticeOrg, '--expiring-within', '1h')).to.deep.equal([]);
      const paged = await suite.cli('key', 'list', noticeOrg, '--expiring-within', '31d', '--limit', '1');
      expect(paged.stdout).to.include(`cos-admin key list ${noticeOrg} --limit 1 --expiring-within 31d --cursor `);
      expect((await suite.cli('key', 'list', noticeOrg, '--expiring-within', '1h')).stdout).to.include('No API key matches.');
      // One grammar in two spellings: the CLI's durations and the API's ISO 8601 durations pick the same keys.
      for (const [cli, iso] of [['6d', 'P6D'], ['5d23h59m', 'P5DT23H59M'], ['1w', 'P1W'], ['4w2d', 'P4W2D'], ['3650d', 'P3650D']] as const) {
        const viaApi = (await core.apiKeys.list(OPERATOR, noticeOrg, { expiring_within: iso })).items.map((k) => k.id);
        expect((await keyListOf(noticeOrg, '--expiring-within', cli)).map((k) => k.id), `${cli} and ${iso}`).to.deep.equal(viaApi);
      }
      for (const bad of ['P7D', '7', '0', '1x', '3651d']) {
        const refused = await suite.cli('key', 'list', noticeOrg, '--expiring-within', bad);
        expect(refused.code, bad).to.equal(2);
        expect(refused.stderr, bad).to.include(`option '--expiring-within <duration>' argument '${bad}' is invalid.`);
      }
    });
  });
}
