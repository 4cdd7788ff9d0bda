/**
 * C-31, C-6: the authentication hot path is one query on the unique digest index, and keyset pages
 * are index range scans. The SQL is captured from the store itself (SqlStore.onStatement), then
 * explained with the same bindings.
 */
import type { KeysetPosition, Stores } from '@cos/core';
import type { SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { at, auditEntry, issuedKey, member, organisation } from './support/fixtures.js';
import { forEachTarget } from './support/targets.js';
import { storePorts } from '@cos/core/testing/contracts';

interface Captured {
  sql: string;
  bindings: readonly unknown[];
}

async function capture(store: SqlStore, call: (stores: Stores) => Promise<unknown>): Promise<Captured[]> {
  const seen: Captured[] = [];
  const stop = store.onStatement((q) => void seen.push({ sql: q.sql, bindings: q.bindings }));
  try {
    await call(storePorts(store));
  } finally {
    stop();
  }
  return seen;
}

async function plan(store: SqlStore, q: Captured): Promise<string> {
  if (store.dialect === 'sqlite') {
    const rows = (await store.knex.raw(`EXPLAIN QUERY PLAN ${q.sql}`, q.bindings as Knex.RawBinding[])) as Array<{ detail: string }>;
    return rows.map((r) => r.detail).join('\n');
  }
  // Tiny test tables would be seq-scanned; forbid that to see which index the planner can use.
  return store.knex.transaction(async (trx) => {
    await trx.raw('SET LOCAL enable_seqscan = off');
    // The statement as the store wrote it ('?' placeholders, the form knex takes too).
    const result = (await trx.raw(`EXPLAIN ${q.sql}`, q.bindings as Knex.RawBinding[])) as { rows: Array<{ 'QUERY PLAN': string }> };
    return result.rows.map((r) => r['QUERY PLAN']).join('\n');
  });
}

forEachTarget('query plans', (target) => {
  let store: SqlStore;
  let orgId: string;
  let digest: string;
  const position: KeysetPosition = { createdAt: at(1), id: '00000000-0000-4000-8000-000000000000' };

  before(async () => {
    store = await target.open();
    const o = organisation();
    orgId = o.id;
    await store.stores.organisations.create(o);
    const { key } = issuedKey(o.id);
    digest = key.digest;
    await store.stores.apiKeys.insert(key);
    await store.stores.members.add(member(o.id));
    await store.stores.audit.append(auditEntry(o.id));
  });
  after(() => store.close());

  async function onlyQuery(call: (stores: Stores) => Promise<unknown>): Promise<string> {
    const queries = await capture(store, call);
    expect(queries, queries.map((q) => q.sql).join('\n')).to.have.length(1);
    return plan(store, queries[0]!);
  }

  it('C-31: findCredential is one query that finds the key through api_keys_digest_unique', async () => {
    const p = await onlyQuery((s) => s.apiKeys.findCredential(digest));
    expect(p).to.include('api_keys_digest_unique');
    expect(p).to.match(/organisations_pkey|sqlite_autoindex_organisations_1|INTEGER PRIMARY KEY|USING INDEX|Index Scan/);
  });

  it('C-6: the organisation keyset page uses organisations_created_at_id', async () => {
    expect(await onlyQuery((s) => s.organisations.list({ limit: 20, after: position }))).to.include('organisations_created_at_id');
    expect(await onlyQuery((s) => s.organisations.list({ limit: 20, after: null }))).to.include('organisations_created_at_id');
  });

  it('C-6: per-organisation key and member pages use their (organisation_id, created_at, id) indexes', async () => {
    expect(await onlyQuery((s) => s.apiKeys.list(orgId, { limit: 20, after: position }))).to.include('api_keys_organisation_created_at_id');
    expect(await onlyQuery((s) => s.members.list(orgId, { limit: 20, after: position }))).to.include('members_organisation_created_at_id');
  });

  it('C-282: the expiry notices scan is one query on the partial index api_keys_expiry_notice_due; the expiring key list uses the per-organisation index', async () => {
    expect(await onlyQuery((s) => s.apiKeys.listExpiryNoticesDue(at(0), 500))).to.include('api_keys_expiry_notice_due');
    const expiring = { expiring: { now: at(0), until: at(7 * 86_400_000) } };
    expect(await onlyQuery((s) => s.apiKeys.list(orgId, { limit: 20, after: position }, expiring))).to.include('api_keys_organisation_created_at_id');
  });

  it('C-6: audit pages use the (occurred_at, id) index, or the per-organisation one when filtered', async () => {
    expect(await onlyQuery((s) => s.audit.list({}, { limit: 20, after: position }))).to.include('audit_entries_occurred_at_id');
    expect(await onlyQuery((s) => s.audit.list({ organisationId: orgId }, { limit: 20, after: position }))).to.include(
      'audit_entries_organisation_occurred_at_id',
    );
  });

  it('C-6, C-41: an audit page by a rare kind across organisations range-scans the partial kind index; by api_key_issued or api_key_revoked it walks (occurred_at, id); with an organisation, the organisation index', async () => {
    for (const after of [null, position]) {
      const rare = await onlyQuery((s) => s.audit.list({ kind: 'member_added' }, { limit: 20, after }));
      expect(rare).to.include('audit_entries_rare_kind_occurred_at_id');
      for (const kind of ['api_key_issued', 'api_key_revoked'] as const) {
        const frequent = await onlyQuery((s) => s.audit.list({ kind }, { limit: 20, after }));
        expect(frequent, kind).to.include('audit_entries_occurred_at_id');
        expect(frequent, kind).to.not.include('audit_entries_rare_kind_occurred_at_id');
      }
      // Postgres plans a one-row table its own way (given the kind as a constant, it may take the partial
      // index for an organisation's listing too); SQLite's plan is the one a larger table gets.
      if (store.dialect !== 'sqlite') continue;
      expect(rare).to.match(/^SEARCH audit_entries USING INDEX audit_entries_rare_kind_occurred_at_id \(kind=\?/);
      expect(rare).to.not.include('TEMP B-TREE');
      for (const kind of ['api_key_issued', 'api_key_revoked'] as const) {
        expect(await onlyQuery((s) => s.audit.list({ kind }, { limit: 20, after })), kind).to.match(/^(SCAN|SEARCH) audit_entries USING INDEX audit_entries_occurred_at_id\b[^\n]*$/);
      }
      for (const kind of ['member_added', 'api_key_revoked'] as const) {
        expect(await onlyQuery((s) => s.audit.list({ organisationId: orgId, kind }, { limit: 20, after })), kind).to.match(
          /^SEARCH audit_entries USING INDEX audit_entries_organisation_occurred_at_id \(organisation_id=\?[^\n]*$/,
        );
      }
    }
  });

  it('C-59: the outbox claim is one statement (Postgres: after the claim lock, in one transaction) that walks the organisations with pending notifications through webhook_outbox_pending_organisation_seq and checks their live claims and due notifications through webhook_outbox_leased_organisation and webhook_outbox_pending_organisation_due', async () => {
    const statements = await capture(store, (s) => s.outbox.claimDue(at(0), at(30_000), 10, 'claim-plan'));
    const claims = statements.filter((q) => q.sql.startsWith('UPDATE webhook_outbox'));
    expect(claims, statements.map((q) => q.sql).join('\n')).to.have.length(1);
    if (store.dialect === 'postgres') {
      expect(statements.map((q) => q.sql.split(/\s/, 2).join(' '))).to.deep.equal(['BEGIN', 'SELECT pg_advisory_xact_lock(?::bigint)', 'UPDATE webhook_outbox', 'COMMIT']);
    } else {
      expect(statements).to.have.length(1);
    }
    const p = await plan(store, claims[0]!);
    if (process.env['COS_TEST_VERBOSE']) console.log(p);
    expect(p).to.include('webhook_outbox_pending_organisation_seq');
    // Postgres plans a near-empty table its own way; SQLite is told the indexes (INDEXED BY).
    if (store.dialect === 'sqlite') {
      expect(p).to.include('webhook_outbox_leased_organisation');
      expect(p).to.include('webhook_outbox_pending_organisation_due');
      expect(p, 'no walk of a status index, no table scan').to.not.match(/webhook_outbox_status_created_at_id|SCAN (webhook_outbox|[ophe])$/m);
    }
    if (store.dialect === 'postgres') expect(p).to.match(/LockRows/);
  });

  it('C-6, C-59: outbox pages use (created_at, id), per organisation or per status; countPending uses the status index', async () => {
    expect(await onlyQuery((s) => s.outbox.list({}, { limit: 20, after: position }))).to.include('webhook_outbox_created_at_id');
    expect(await onlyQuery((s) => s.outbox.list({ organisationId: orgId }, { limit: 20, after: position }))).to.include(
      'webhook_outbox_organisation_created_at_id',
    );
    expect(await onlyQuery((s) => s.outbox.list({ status: 'failed' }, { limit: 20, after: position }))).to.include('webhook_outbox_status_created_at_id');
    expect(await onlyQuery((s) => s.outbox.countPending())).to.match(/webhook_outbox_status_(next_attempt_at|created_at)_id|webhook_outbox_pending_organisation_(seq|due)/);
  });

  it('C-59: the retention purge finds completed notifications through webhook_outbox_completed_at_id', async () => {
    expect(await onlyQuery((s) => s.outbox.purgeCompleted(at(0), 1_000))).to.include('webhook_outbox_completed_at_id');
  });

  // Either the primary key or (organisation_id, created_at, id) with both ids as index conditions: on
  // a one-row table Postgres's choice between the two follows the row width (it changed with the
  // scopes and created_by_key_id columns); both are index lookups, never a scan.
  const KEY_ID_LOOKUP = /api_keys_pkey|sqlite_autoindex_api_keys_1|Index Scan using api_keys_organisation_created_at_id/;

  it('a key id lookup and a revocation are index lookups', async () => {
    expect(await onlyQuery((s) => s.apiKeys.findById(orgId, position.id))).to.match(KEY_ID_LOOKUP);
    expect(await onlyQuery((s) => s.apiKeys.revoke(orgId, position.id, at(5)))).to.match(KEY_ID_LOOKUP);
  });

  it('C-61: the lineage walk (listCreatedBy) uses api_keys_created_by_created_at_id', async () => {
    expect(await onlyQuery((s) => s.apiKeys.listCreatedBy(position.id))).to.include('api_keys_created_by_created_at_id');
  });
});
