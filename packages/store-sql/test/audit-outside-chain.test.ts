/**
 * Rows outside an organisation's audit chain (C-120): the schema refuses them (migration 0013), yet
 * someone with enough rights over the database can drop or bypass the constraints. Such rows are
 * forged here exactly that way (SQLite: PRAGMA ignore_check_constraints; Postgres: the constraints
 * dropped), and the store then never lists them as entries, leaves them out of the heads, and
 * counts them per organisation for `audit verify`.
 */
import type { ChainedAuditEntry } from '@cos/core';
import { newAuditEntry } from '@cos/core/testing/contracts';
import type { SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import { forEachTarget } from './support/targets.js';

const ORG_A = 'a9000000-0000-4000-8000-000000000000';
const ORG_B = 'b9000000-0000-4000-8000-000000000000';

/** A forged "revoked by operator security-team" row of ORG_A with the given seq. */
function forged(n: number, seq: number | null, kind = 'api_key_revoked') {
  return {
    id: `c9000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    kind,
    occurred_at: Date.UTC(2026, 5, 11) + n,
    organisation_id: ORG_A,
    key_id: null,
    key_prefix: null,
    actor_type: 'operator',
    actor_key_id: null,
    actor_name: 'security-team',
    seq,
    prev_hash: '0'.repeat(64),
    hash: 'f'.repeat(64),
  };
}

/** Inserts rows past the schema's constraints, as someone with DDL rights could. */
async function forge(store: SqlStore, rows: ReadonlyArray<ReturnType<typeof forged>>): Promise<void> {
  if (store.dialect === 'sqlite') {
    await store.knex.transaction(async (trx) => {
      await trx.raw('PRAGMA ignore_check_constraints = ON');
      await trx('audit_entries').insert(rows);
      await trx.raw('PRAGMA ignore_check_constraints = OFF');
    });
    return;
  }
  await store.knex.raw('ALTER TABLE audit_entries DROP CONSTRAINT audit_entries_seq_check, ALTER COLUMN seq DROP NOT NULL');
  await store.knex('audit_entries').insert(rows);
}

forEachTarget('audit rows outside the chain', (target) => {
  let store: SqlStore;
  afterEach(() => store?.close());

  it('C-120: are never listed (by organisation, kind, both, a rare kind, or neither), are no head, and are counted per organisation', async () => {
    store = await target.openUnmigrated();
    await store.migrate();
    const genuine: ChainedAuditEntry[] = [];
    for (let i = 0; i < 3; i++) genuine.push(await store.stores.audit.append(newAuditEntry(ORG_A, { kind: 'api_key_revoked', occurredAt: new Date(Date.UTC(2026, 5, 10) + i) })));
    genuine.push(await store.stores.audit.append(newAuditEntry(ORG_B, { kind: 'member_added', occurredAt: new Date(Date.UTC(2026, 5, 10)) })));
    const heads = await store.stores.audit.heads();
    // SQLite keeps NOT NULL whatever the pragma: its forged rows have seq 0 and below (distinct: the seq stays unique).
    const rows = [forged(1, 0), forged(2, -1), forged(3, -2, 'member_added'), ...(store.dialect === 'postgres' ? [forged(4, null)] : [])];
    await forge(store, rows);

    const ALL = { limit: 100, after: null } as const;
    const ids = async (filter: Parameters<SqlStore['stores']['audit']['list']>[0]) => (await store.stores.audit.list(filter, ALL)).map((e) => e.id).sort();
    const genuineIds = (pick: (e: ChainedAuditEntry) => boolean) => genuine.filter(pick).map((e) => e.id).sort();
    expect(await ids({})).to.deep.equal(genuineIds(() => true));
    expect(await ids({ kind: 'api_key_revoked' }), 'the runbook confirmation step').to.deep.equal(genuineIds((e) => e.kind === 'api_key_revoked'));
    expect(await ids({ organisationId: ORG_A })).to.deep.equal(genuineIds((e) => e.organisationId === ORG_A));
    expect(await ids({ organisationId: ORG_A, kind: 'api_key_revoked' })).to.deep.equal(genuineIds((e) => e.organisationId === ORG_A));
    expect(await ids({ kind: 'member_added' }), 'a rare kind across organisations').to.deep.equal(genuineIds((e) => e.kind === 'member_added'));
    expect((await store.stores.audit.chain(ORG_A, { afterSeq: 0, limit: 100 })).map((e) => e.seq)).to.deep.equal([1, 2, 3]);
    expect(await store.stores.audit.heads(), 'heads name chained entries only').to.deep.equal(heads);

    const first = rows.map((r) => r.id).sort()[0]!;
    expect(await store.stores.audit.outsideChain()).to.deep.equal([{ organisationId: ORG_A, entries: rows.length, firstId: first }]);
    expect(await store.stores.audit.outsideChain(ORG_A)).to.deep.equal([{ organisationId: ORG_A, entries: rows.length, firstId: first }]);
    expect(await store.stores.audit.outsideChain(ORG_B)).to.deep.equal([]);
  });
});
