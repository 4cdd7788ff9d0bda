/**
 * copyDatabase (C-190) on every dialect: the copied and skipped tables cover the whole migrated
 * schema (a new table must be given a place in the copy), a failure mid-copy leaves the target
 * without a row, and records read back from the target equal the source's (booleans and big
 * integers translated between the dialects' spellings).
 */
import { expect } from 'chai';
import { DEFAULT_KEY_POLICY } from '@cos/core';
import { storePorts } from '@cos/core/testing/contracts';
import { checkCopyEnds, COPIED_TABLES, copyDatabase, CopyRefused, SKIPPED_TABLES, tableCounts, tablesOf, type SqlStore } from '@cos/store-sql';
import { issuedKey, organisation } from './support/fixtures.js';
import { forEachTarget } from './support/targets.js';

const SCAN_AT = new Date(Date.UTC(2026, 2, 1));

forEachTarget('copyDatabase', (target) => {
  const open: SqlStore[] = [];
  afterEach(async () => {
    for (const s of open.splice(0)) await s.close();
  });

  async function source(): Promise<{ store: SqlStore; orgIds: string[] }> {
    const store = await target.open();
    open.push(store);
    const system = organisation({ isSystem: true, slug: 'platform' });
    const plain = organisation({ slug: 'plain', rateLimitPerMinute: 250 });
    await store.stores.organisations.create(system);
    await store.stores.organisations.create(plain);
    // Every column of api_keys is carried, metadata and allowed_cidrs included (C-260, C-262).
    const keys = Array.from({ length: 5 }, (_, i) =>
      issuedKey(plain.id, i % 2 === 0 ? { metadata: { owner: `team-${i}`, 'ci.job': 'deploy' }, allowedCidrs: ['10.0.0.0/8', '2001:db8::/32'] } : {}).key,
    );
    for (const key of keys) await store.stores.apiKeys.insert(key);
    // Usage history is copied: a count over 2^31 checks the big integer on the way.
    await store.stores.usage.add(keys.slice(0, 3).map((k, i) => ({ keyId: k.id, hourStart: new Date(Date.UTC(2026, 2, 1, i)), requests: 3_000_000_000 + i, rateLimited: i })));
    // Expiry notices are carried: the policy's notice period and which keys were noticed (C-280, C-282).
    await storePorts(store).organisations.putKeyPolicy(system.id, { ...DEFAULT_KEY_POLICY, expiryNoticeSeconds: 30 * 86_400 }, SCAN_AT);
    const noticed = issuedKey(system.id, { expiresAt: new Date(Date.UTC(2026, 2, 20)) }).key;
    const due = issuedKey(system.id, { expiresAt: new Date(Date.UTC(2026, 2, 21)) }).key;
    await store.stores.apiKeys.insert(noticed);
    await store.stores.apiKeys.insert(due);
    expect(await store.stores.apiKeys.claimExpiryNotice(noticed.id, SCAN_AT)).to.equal(true);
    return { store, orgIds: [system.id, plain.id] };
  }

  async function empty(): Promise<SqlStore> {
    const store = await target.openUnmigrated();
    open.push(store);
    return store;
  }

  it('C-190: every table of the migrated schema is either copied or skipped with a reason', async () => {
    const store = await target.open();
    open.push(store);
    const placed = [...COPIED_TABLES.map((t) => t.name), ...Object.keys(SKIPPED_TABLES)].sort();
    const present = await tablesOf(store.knex, store.dialect);
    expect(present.filter((t) => !placed.includes(t)), 'tables the copy does not know').to.deep.equal([]);
    expect(COPIED_TABLES.map((t) => t.name).filter((t) => !present.includes(t)), 'copied tables the schema lacks').to.deep.equal([]);
  });

  it('C-190: a failure in the middle of a table rolls the whole copy back, and a second copy carries every row as stored', async () => {
    const { store, orgIds } = await source();
    const into = await empty();
    await checkCopyEnds(store, into);
    let batches = 0;
    const failing = copyDatabase(store, into, {
      batchSize: 2,
      onProgress: (p) => {
        if (p.table === 'api_keys' && ++batches === 2) throw new Error('interrupted');
      },
    });
    await failing.then(
      () => expect.fail('the copy should fail'),
      (err: Error) => expect(err.message).to.equal('interrupted'),
    );
    for (const [table, n] of await tableCounts(into.knex)) expect(n, table).to.equal(0);

    await checkCopyEnds(store, into);
    const result = await copyDatabase(store, into, { batchSize: 2 });
    expect(result.migrated).to.deep.equal([]);
    expect(Object.fromEntries(result.tables.map((t) => [t.table, t.rows]))).to.include({ organisations: 2, api_keys: 7, key_usage: 3, organisation_key_policies: 1 });
    expect(await into.stores.organisations.findKeyPolicy(orgIds[0]!)).to.deep.equal(await store.stores.organisations.findKeyPolicy(orgIds[0]!));
    const dueOn = async (s: SqlStore): Promise<string[]> => (await s.stores.apiKeys.listExpiryNoticesDue(SCAN_AT, 10)).map((k) => k.id);
    expect(await dueOn(into), 'the noticed key stays noticed; the other is still due').to.deep.equal(await dueOn(store)).and.to.have.length(1);
    const usageRange = { since: new Date(Date.UTC(2026, 2, 1)), until: new Date(Date.UTC(2026, 2, 2)), granularity: 'hour' as const };
    const copiedUsage = await into.stores.usage.forOrganisation(orgIds[1]!, usageRange);
    expect(copiedUsage).to.have.length(3);
    expect(copiedUsage).to.deep.equal(await store.stores.usage.forOrganisation(orgIds[1]!, usageRange));
    for (const id of orgIds) expect(await into.stores.organisations.findById(id)).to.deep.equal(await store.stores.organisations.findById(id));
    const copiedKeys = await into.stores.apiKeys.list(orgIds[1]!, { limit: 100, after: null });
    expect(copiedKeys).to.deep.equal(await store.stores.apiKeys.list(orgIds[1]!, { limit: 100, after: null }));
    expect(copiedKeys.filter((k) => k.allowedCidrs !== null).map((k) => [k.metadata, k.allowedCidrs])).to.have.length(3).and.to.deep.include([
      { 'ci.job': 'deploy', owner: 'team-0' },
      ['10.0.0.0/8', '2001:db8::/32'],
    ]);

    // Now the target holds rows: a further copy is refused.
    await checkCopyEnds(store, into).then(
      () => expect.fail('a second copy into a filled target should be refused'),
      (err: Error) => {
        expect(err).to.be.instanceOf(CopyRefused);
        expect(err.message).to.equal('the target database is not empty: organisations holds 2 rows');
      },
    );
  });
});
