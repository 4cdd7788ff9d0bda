/** Migrations as code: forward-only, idempotent, the same schema on both dialects. */
import { MIGRATIONS, MIGRATIONS_TABLE, sqlMigrationSource, type SqlStore } from '@cos/store-sql';
import { ALL_BUILTIN_SCOPES } from '@cos/core';
import { expect } from 'chai';
import { AUDIT_KINDS, auditRecord, ChainVerifier, GENESIS_HASH, linkAuditEntry, type AuditEntry, type AuditFilter, type ChainedAuditEntry, type ChainRecord, type KeysetPosition } from '@cos/core';
import { forEachTarget, TABLES } from './support/targets.js';
import { rejection } from '@cos/test-support/rejection';

async function hasTable(store: SqlStore, name: string): Promise<boolean> {
  return store.knex.schema.hasTable(name);
}

async function currentSchema(store: SqlStore): Promise<string> {
  return ((await store.knex.raw('SELECT current_schema() AS s')) as { rows: Array<{ s: string }> }).rows[0]!.s;
}

async function indexNames(store: SqlStore, table: string): Promise<string[]> {
  if (store.dialect === 'sqlite') {
    const rows = (await store.knex.raw(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL`, [table])) as Array<{
      name: string;
    }>;
    return rows.map((r) => r.name).sort();
  }
  const result = (await store.knex.raw(
    `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ? AND indexname NOT LIKE '%_pkey'`,
    [table],
  )) as { rows: Array<{ indexname: string }> };
  return result.rows.map((r) => r.indexname).sort();
}

/** Entries without their chain columns (what migrations before 0009 wrote). */
function unchained(entries: readonly ChainedAuditEntry[]): AuditEntry[] {
  return entries.map(({ seq: _s, prevHash: _p, hash: _h, ...e }) => e);
}

/** Ids in listing order: (occurred_at, id). */
function listed(entries: readonly AuditEntry[]): AuditEntry[] {
  return [...entries].sort((a, b) => a.occurredAt.getTime() - b.occurredAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

forEachTarget('migrations', (target) => {
  let store: SqlStore;
  afterEach(() => store?.close());

  /**
   * Appends operator entries without key fields as rows of an earlier schema, each chained after its
   * organisation's previous one as the store chains them. The store code reads and writes the
   * columns of every migration, so history written before the last migration is written here.
   */
  async function appendRows(entries: readonly AuditEntry[]): Promise<ChainedAuditEntry[]> {
    const heads = new Map<string, { seq: number; hash: string }>();
    const chained: ChainedAuditEntry[] = [];
    for (const e of entries) {
      const c = linkAuditEntry(e, heads.get(e.organisationId) ?? null);
      heads.set(e.organisationId, { seq: c.seq, hash: c.hash });
      await store.knex('audit_entries').insert({
        id: c.id,
        kind: c.kind,
        occurred_at: c.occurredAt.getTime(),
        organisation_id: c.organisationId,
        key_id: null,
        key_prefix: null,
        actor_type: 'operator',
        actor_key_id: null,
        actor_name: c.actor.type === 'operator' ? (c.actor.name ?? null) : null,
        seq: c.seq,
        prev_hash: c.prevHash,
        hash: c.hash,
      });
      chained.push(c);
    }
    return chained;
  }

  /**
   * A database migrated up to just before migration `name`; answers the names still pending, checked
   * to be exactly `name` and the later ones.
   */
  async function openBefore(name: string): Promise<string[]> {
    store = await target.openUnmigrated();
    const source = { migrationSource: sqlMigrationSource(store.dialect), tableName: MIGRATIONS_TABLE };
    const before = MIGRATIONS.findIndex((m) => m.name === name);
    expect(before, name).to.be.greaterThan(0);
    for (let i = 0; i < before; i++) await store.knex.migrate.up(source);
    const pending = MIGRATIONS.slice(before).map((m) => m.name);
    expect(await store.pendingMigrations()).to.deep.equal(pending);
    return pending;
  }

  it('C-112: 0013_redis_identity adds the registry\'s redis_identity column; rows registered before it keep theirs and read back with no identity', async () => {
    await openBefore('0013_redis_identity');
    await store.query("INSERT INTO instance_registry (instance_id, role, redis_location, redis_auth, started_at, heartbeat_at) VALUES ('old-instance', 'cache', 'redis://127.0.0.1:6410/0', ?, 1, 1)", [
      store.dialect === 'postgres' ? false : 0,
    ]);
    expect(await store.migrate()).to.deep.equal(['0013_redis_identity', '0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
    expect(await store.query('SELECT instance_id, redis_location, redis_identity FROM instance_registry')).to.deep.equal([
      { instance_id: 'old-instance', redis_location: 'redis://127.0.0.1:6410/0', redis_identity: null },
    ]);
  });

  it('lists every migration as pending on an empty database, without creating anything', async () => {
    store = await target.openUnmigrated();
    expect(await store.pendingMigrations()).to.deep.equal(MIGRATIONS.map((m) => m.name));
    expect(await hasTable(store, MIGRATIONS_TABLE), 'pendingMigrations is read-only').to.equal(false);
    for (const t of TABLES) expect(await hasTable(store, t), t).to.equal(false);
  });

  it('migrate() applies the pending migrations and returns their names; then nothing is pending', async () => {
    store = await target.openUnmigrated();
    expect(await store.migrate()).to.deep.equal(['0001_initial', '0002_leaked_keys', '0003_key_lifecycle', '0004_operator_audit', '0005_instance_registry', '0006_delivery_per_endpoint', '0007_webhook_at_rest', '0008_least_privilege', '0009_audit_chain', '0010_idempotency_keys', '0011_webhook_overlap', '0012_audit_rare_kind_index', '0013_redis_identity', '0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
    expect(await store.pendingMigrations()).to.deep.equal([]);
    for (const t of TABLES) expect(await hasTable(store, t), t).to.equal(true);
  });

  it('migrate() is idempotent: a second run applies nothing and keeps the data', async () => {
    store = await target.openUnmigrated();
    await store.migrate();
    await store.knex('organisations').insert({
      id: 'a0000000-0000-4000-8000-000000000000',
      name: 'Kept',
      slug: 'kept',
      industry_section: null,
      is_system: false,
      created_at: 1,
      updated_at: 1,
    });
    expect(await store.migrate()).to.deep.equal([]);
    expect(await store.migrate()).to.deep.equal([]);
    expect((await store.stores.organisations.findById('a0000000-0000-4000-8000-000000000000'))?.name).to.equal('Kept');
  });

  it("C-6, C-13, C-31, C-282: creates the unique and keyset indexes, and the expiry notices scan's", async () => {
    store = await target.open();
    expect(await indexNames(store, 'organisations')).to.deep.equal([
      'organisations_created_at_id',
      'organisations_slug_unique',
      'organisations_system_created_at_id',
    ]);
    expect(await indexNames(store, 'members')).to.deep.equal(['members_organisation_created_at_id', 'members_organisation_email_unique']);
    expect(await indexNames(store, 'api_keys')).to.deep.equal(['api_keys_created_by_created_at_id', 'api_keys_digest_unique', 'api_keys_expiry_notice_due', 'api_keys_organisation_created_at_id', 'api_keys_rolled_from_unique']);
    expect(await indexNames(store, 'audit_entries')).to.deep.equal([
      'audit_entries_occurred_at_id',
      'audit_entries_organisation_occurred_at_id',
      'audit_entries_organisation_seq_unique',
      'audit_entries_rare_kind_occurred_at_id',
    ]);
  });

  it('C-59: creates the outbox claim and list indexes; exposures and endpoints are keyed by their primary keys', async () => {
    store = await target.open();
    expect(await indexNames(store, 'webhook_outbox')).to.deep.equal([
      'webhook_outbox_completed_at_id',
      'webhook_outbox_created_at_id',
      'webhook_outbox_leased_organisation',
      'webhook_outbox_organisation_created_at_id',
      'webhook_outbox_pending_organisation_due',
      'webhook_outbox_pending_organisation_seq',
      'webhook_outbox_seq_unique',
      'webhook_outbox_status_created_at_id',
      'webhook_outbox_status_next_attempt_at_id',
    ]);
    expect(await indexNames(store, 'webhook_endpoints')).to.deep.equal([]);
    expect(await indexNames(store, 'api_key_exposures')).to.deep.equal([]);
  });

  it('0004_operator_audit only adds nullable columns: entries written before it read back without a name or member', async () => {
    await openBefore('0004_operator_audit');
    const orgId = 'b0000000-0000-4000-8000-000000000000';
    const before = { id: 'c0000000-0000-4000-8000-000000000001', kind: 'organisation_created', occurred_at: 6, organisation_id: orgId, key_id: null, key_prefix: null, actor_type: 'operator', actor_key_id: null };
    await store.knex('audit_entries').insert(before);
    expect(await store.migrate()).to.deep.equal(MIGRATIONS.slice(3).map((m) => m.name));
    const entry = { id: 'c0000000-0000-4000-8000-000000000002', kind: 'member_added' as const, occurredAt: new Date(7), organisationId: orgId, keyId: null, keyPrefix: null, actor: { type: 'operator' as const, name: 'ada' }, member: { id: 'e0000000-0000-4000-8000-000000000000' } };
    await store.stores.audit.append(entry);
    expect(unchained(await store.stores.audit.list({}, { limit: 10, after: null }))).to.deep.equal([
      { id: before.id, kind: 'organisation_created', occurredAt: new Date(6), organisationId: orgId, keyId: null, keyPrefix: null, actor: { type: 'operator' } },
      entry,
    ]);
  });

  it('0007_webhook_at_rest only adds nullable columns and an index: entries and notifications written before it read back unchanged', async () => {
    const pending = await openBefore('0007_webhook_at_rest');
    const orgId = 'b2000000-0000-4000-8000-000000000000';
    await store.knex('organisations').insert({ id: orgId, name: 'Kept', slug: 'kept-0007', industry_section: null, is_system: false, created_at: 1, updated_at: 1 });
    await store.knex('audit_entries').insert({ id: 'c2000000-0000-4000-8000-000000000001', kind: 'organisation_created', occurred_at: 2, organisation_id: orgId, key_id: null, key_prefix: null, actor_type: 'operator', actor_key_id: null, actor_name: 'ada' });
    await store.knex('webhook_outbox').insert({ id: 'c2000000-0000-4000-8000-000000000002', organisation_id: orgId, event_type: 'api_key.issued', payload: '{}', status: 'delivered', attempts: 1, next_attempt_at: 3, created_at: 3, completed_at: 4, last_error: null });
    expect(await store.migrate()).to.deep.equal(pending);
    expect(unchained(await store.stores.audit.list({}, { limit: 10, after: null }))).to.deep.equal([
      { id: 'c2000000-0000-4000-8000-000000000001', kind: 'organisation_created', occurredAt: new Date(2), organisationId: orgId, keyId: null, keyPrefix: null, actor: { type: 'operator', name: 'ada' } },
    ]);
    expect(await store.stores.outbox.purgeCompleted(new Date(5), 10), 'the old delivered row is purgeable').to.equal(1);
  });

  it('C-41, C-58: 0002_leaked_keys keeps the audit entries written under 0001 and admits only the secret_scanning actor besides the old ones', async () => {
    await openBefore('0002_leaked_keys');
    const orgId = 'b0000000-0000-4000-8000-000000000000';
    const old = [
      { id: 'c0000000-0000-4000-8000-000000000001', kind: 'api_key_revoked', occurred_at: 5, organisation_id: orgId, key_id: 'd0000000-0000-4000-8000-000000000000', key_prefix: 'svc_live_abc', actor_type: 'api_key', actor_key_id: 'd0000000-0000-4000-8000-000000000000' },
      { id: 'c0000000-0000-4000-8000-000000000002', kind: 'organisation_created', occurred_at: 6, organisation_id: orgId, key_id: null, key_prefix: null, actor_type: 'operator', actor_key_id: null },
    ];
    await store.knex('audit_entries').insert(old);
    // After 0014 a row needs its place in the chain (seq, prev_hash, hash) as well.
    const link = (n: number) => ({ seq: 10 + n, prev_hash: '0'.repeat(64), hash: '0'.repeat(64) });
    const insertActor = (n: number, actor_type: string, extra: Record<string, unknown> = {}) =>
      store.knex('audit_entries').insert({ ...old[1], id: `c0000000-0000-4000-8000-00000000000${n}`, actor_type, ...extra });
    expect(await rejection(insertActor(3, 'secret_scanning')), 'under 0001 the CHECK refuses the new actor').to.be.instanceOf(Error);

    expect(await store.migrate()).to.deep.equal(MIGRATIONS.slice(1).map((m) => m.name));
    const listed = unchained(await store.stores.audit.list({}, { limit: 10, after: null }));
    expect(listed).to.deep.equal([
      { id: old[0]!.id, kind: 'api_key_revoked', occurredAt: new Date(5), organisationId: orgId, keyId: old[0]!.key_id, keyPrefix: 'svc_live_abc', actor: { type: 'api_key', keyId: old[0]!.actor_key_id } },
      { id: old[1]!.id, kind: 'organisation_created', occurredAt: new Date(6), organisationId: orgId, keyId: null, keyPrefix: null, actor: { type: 'operator' } },
    ]);
    await insertActor(4, 'secret_scanning', link(4));
    expect(await rejection(insertActor(5, 'nobody', link(5))), 'an unknown actor is still refused').to.be.instanceOf(Error);
    expect(await indexNames(store, 'audit_entries'), 'the rebuilt table has its indexes back').to.deep.equal([
      'audit_entries_occurred_at_id',
      'audit_entries_organisation_occurred_at_id',
      'audit_entries_organisation_seq_unique',
      'audit_entries_rare_kind_occurred_at_id',
    ]);
  });

  it('0003_key_lifecycle keeps keys and audit entries written under 0002 (never used, not rolled, no roll detail)', async () => {
    await openBefore('0003_key_lifecycle');
    const orgId = 'b1000000-0000-4000-8000-000000000000';
    const keyId = 'd1000000-0000-4000-8000-000000000000';
    await store.knex('organisations').insert({ id: orgId, name: 'Kept', slug: 'kept-0003', industry_section: null, is_system: false, created_at: 1, updated_at: 1 });
    await store.knex('api_keys').insert({ id: keyId, organisation_id: orgId, label: 'old', key_prefix: 'svc_live_abc', digest: 'a'.repeat(64), expires_at: null, created_at: 2, revoked_at: null });
    await store.knex('audit_entries').insert({ id: 'c1000000-0000-4000-8000-000000000001', kind: 'api_key_issued', occurred_at: 3, organisation_id: orgId, key_id: keyId, key_prefix: 'svc_live_abc', actor_type: 'operator', actor_key_id: null });
    expect(await store.migrate()).to.deep.equal(['0003_key_lifecycle', '0004_operator_audit', '0005_instance_registry', '0006_delivery_per_endpoint', '0007_webhook_at_rest', '0008_least_privilege', '0009_audit_chain', '0010_idempotency_keys', '0011_webhook_overlap', '0012_audit_rare_kind_index', '0013_redis_identity', '0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
    const key = await store.stores.apiKeys.findById(orgId, keyId);
    expect(key).to.include({ id: keyId, label: 'old', lastUsedAt: null, rolledFromKeyId: null });
    const [entry] = await store.stores.audit.list({}, { limit: 10, after: null });
    expect(entry).to.not.have.property('roll');
    expect(entry).to.include({ kind: 'api_key_issued', keyId });
  });

  it('C-59: 0006_delivery_per_endpoint numbers the outbox rows written before it in (created_at, id) order; rows enqueued after it come later, each organisation claimed in that order', async () => {
    const pending = await openBefore('0006_delivery_per_endpoint');
    const orgA = 'b2000000-0000-4000-8000-00000000000a';
    const orgB = 'b2000000-0000-4000-8000-00000000000b';
    const row = (id: string, organisation_id: string, created_at: number, status = 'pending') => ({
      id,
      organisation_id,
      event_type: 'api_key.issued',
      payload: '{}',
      status,
      attempts: 0,
      next_attempt_at: created_at,
      created_at,
      completed_at: status === 'pending' ? null : created_at,
      last_error: null,
      claim_id: null,
      lease_until: null,
    });
    // Inserted out of order: (created_at, id) decides the numbering, not the insertion.
    await store.knex('webhook_outbox').insert([
      row('f2000000-0000-4000-8000-000000000003', orgA, 20),
      row('f2000000-0000-4000-8000-000000000002', orgA, 10),
      row('f2000000-0000-4000-8000-000000000001', orgA, 10),
      row('f2000000-0000-4000-8000-000000000004', orgB, 5, 'delivered'),
    ]);
    expect(await store.migrate()).to.deep.equal(pending);
    const seqs = (await store.knex('webhook_outbox').select('id', 'seq').orderBy('seq')) as Array<{ id: string; seq: unknown }>;
    expect(seqs.map((r) => [r.id.slice(-1), Number(r.seq)])).to.deep.equal([['4', 1], ['1', 2], ['2', 3], ['3', 4]]);
    await store.stores.outbox.enqueue({
      id: 'f2000000-0000-4000-8000-000000000000',
      organisationId: orgA,
      type: 'api_key.revoked',
      payload: '{}',
      status: 'pending',
      attempts: 0,
      nextAttemptAt: new Date(1),
      createdAt: new Date(1),
      completedAt: null,
      lastError: null,
    });
    const claimedInOrder: string[] = [];
    for (let i = 0; i < 4; i++) {
      const [n, ...more] = await store.stores.outbox.claimDue(new Date(100), new Date(1_000), 10, `c${i}`);
      expect(more).to.deep.equal([]);
      claimedInOrder.push(n!.id.slice(-1));
      await store.stores.outbox.complete(n!.id, `c${i}`, { status: 'delivered', at: new Date(100) });
    }
    expect(claimedInOrder, 'write order: the rows numbered by the migration, then the one enqueued after it').to.deep.equal(['1', '2', '3', '0']);
  });

  it('C-56, C-60, C-61: 0008_least_privilege gives keys made before it every built-in scope and no creator, and keeps old audit entries as they were', async () => {
    await openBefore('0008_least_privilege');
    const orgId = 'b8000000-0000-4000-8000-000000000000';
    const keyId = 'd8000000-0000-4000-8000-000000000000';
    await store.knex('organisations').insert({ id: orgId, name: 'Kept', slug: 'kept-0008', industry_section: null, is_system: false, created_at: 1, updated_at: 1 });
    await store.knex('api_keys').insert({ id: keyId, organisation_id: orgId, label: 'old', key_prefix: 'svc_live_abc', digest: 'b'.repeat(64), expires_at: null, created_at: 2, revoked_at: null });
    await store.knex('audit_entries').insert({ id: 'c8000000-0000-4000-8000-000000000001', kind: 'api_key_issued', occurred_at: 3, organisation_id: orgId, key_id: keyId, key_prefix: 'svc_live_abc', actor_type: 'operator', actor_key_id: null });
    await store.migrate();
    const key = await store.stores.apiKeys.findById(orgId, keyId);
    expect(key?.scopes).to.deep.equal([...ALL_BUILTIN_SCOPES]);
    expect(key?.createdByKeyId).to.equal(null);
    expect((await store.stores.apiKeys.findCredential('b'.repeat(64)))?.key.scopes).to.deep.equal([...ALL_BUILTIN_SCOPES]);
    const [entry] = await store.stores.audit.list({}, { limit: 10, after: null });
    expect(entry).to.not.have.property('descendantKeyIds');
    expect(entry).to.not.have.property('keyPolicy');
    expect(await store.stores.organisations.findKeyPolicy(orgId)).to.equal(null);
  });

  it('C-63: 0009_audit_chain drops member e-mail addresses and chains the existing entries of each organisation in their listed order', async () => {
    // Up to 0004, the last migration with member_email in its rows' shape; everything after runs with 0009.
    await openBefore('0005_instance_registry');
    const orgA = 'b2000000-0000-4000-8000-000000000000';
    const orgB = 'b3000000-0000-4000-8000-000000000000';
    const row = (n: number, org: string, at: number, extra: Record<string, unknown> = {}) => ({
      id: `c2000000-0000-4000-8000-0000000000${String(n).padStart(2, '0')}`,
      kind: 'organisation_updated',
      occurred_at: at,
      organisation_id: org,
      key_id: null,
      key_prefix: null,
      actor_type: 'operator',
      actor_key_id: null,
      ...extra,
    });
    // Inserted out of order; two share an instant (ordered by id). 2500 rows of A: more than one batch.
    const rows = [
      row(3, orgA, 20),
      row(1, orgA, 10, { kind: 'member_added', member_id: 'e2000000-0000-4000-8000-000000000000', member_email: 'Grace@example.com', actor_name: 'ada' }),
      row(2, orgA, 10),
      row(4, orgB, 5),
    ];
    await store.knex('audit_entries').insert(rows);
    const bulk = Array.from({ length: 2500 }, (_, i) => ({ ...row(0, orgA, 1000 + i), id: `c3000000-0000-4000-8000-${String(i).padStart(12, '0')}` }));
    for (let i = 0; i < bulk.length; i += 250) await store.knex('audit_entries').insert(bulk.slice(i, i + 250));
    expect(await store.migrate()).to.deep.equal(MIGRATIONS.slice(4).map((m) => m.name));

    const columns = await store.knex('audit_entries').columnInfo();
    expect(columns, 'no e-mail column is left').to.not.have.property('member_email');
    const a = await store.stores.audit.chain(orgA, { afterSeq: 0, limit: 5 });
    expect(a.map((e) => [e.seq, e.id])).to.deep.equal([
      [1, rows[1]!.id],
      [2, rows[2]!.id],
      [3, rows[0]!.id],
      [4, bulk[0]!.id],
      [5, bulk[1]!.id],
    ]);
    expect(a[0]).to.deep.include({ prevHash: GENESIS_HASH, member: { id: 'e2000000-0000-4000-8000-000000000000' }, actor: { type: 'operator', name: 'ada' } });
    const b = await store.stores.audit.chain(orgB, { afterSeq: 0, limit: 5 });
    expect(b.map((e) => [e.seq, e.prevHash])).to.deep.equal([[1, GENESIS_HASH]]);

    const appended = await store.stores.audit.append({ ...unchained([a[1]!])[0]!, id: 'c4000000-0000-4000-8000-000000000000', occurredAt: new Date(1) });
    expect(appended.seq, 'new entries continue the chain').to.equal(2504);
    for (const org of [orgA, orgB]) {
      const v = new ChainVerifier(org);
      for (let after = 0; ; ) {
        const page = await store.stores.audit.chain(org, { afterSeq: after, limit: 1000 });
        if (page.length === 0) break;
        for (const e of page) v.push(auditRecord(e) as unknown as ChainRecord);
        after = page[page.length - 1]!.seq;
      }
      expect(v.finish()).to.include({ status: 'ok', entries: org === orgA ? 2504 : 1 });
    }
    expect(await rejection(store.knex('audit_entries').insert({ ...row(9, orgB, 1), seq: 1, prev_hash: GENESIS_HASH, hash: GENESIS_HASH })), 'UNIQUE (organisation_id, seq)').to.be.instanceOf(Error);
  });

  it('C-6, C-41: 0012_audit_rare_kind_index keeps every audit listing\'s answers (by kind, organisation, both, neither; page by page) on entries written before it', async () => {
    await openBefore('0012_audit_rare_kind_index');
    const orgs = ['b4000000-0000-4000-8000-00000000000a', 'b4000000-0000-4000-8000-00000000000b'];
    // Every kind, the two frequent ones dense; instants repeat, so ties are ordered by id.
    const kinds = AUDIT_KINDS.flatMap((kind) => Array.from({ length: kind === 'api_key_issued' || kind === 'api_key_revoked' ? 9 : 2 }, () => kind));
    const entries = await appendRows(
      kinds.map((kind, i) => ({
        id: `c4000000-0000-4000-8000-${String((i * 37) % kinds.length).padStart(12, '0')}`,
        kind,
        occurredAt: new Date(100 + ((i * 5) % 13)),
        organisationId: orgs[i % 2]!,
        keyId: null,
        keyPrefix: null,
        actor: { type: 'operator', name: 'ada' },
      })),
    );
    const filters: AuditFilter[] = [{}, ...orgs.map((organisationId) => ({ organisationId }))];
    for (const kind of AUDIT_KINDS) filters.push({ kind }, ...orgs.map((organisationId) => ({ organisationId, kind })));
    // What every listing answered before the index changed: the entries it selects in (occurred_at, id) order.
    const before = filters.map((f) =>
      listed(entries.filter((e) => (f.organisationId === undefined || e.organisationId === f.organisationId) && (f.kind === undefined || e.kind === f.kind))).map(
        (e) => `${e.occurredAt.getTime()}/${e.id}`,
      ),
    );
    const answers = async (): Promise<string[][]> => {
      const out: string[][] = [];
      for (const filter of filters) {
        const ids: string[] = [];
        for (let after: KeysetPosition | null = null; ; ) {
          const page = await store.stores.audit.list(filter, { limit: 3, after });
          ids.push(...page.map((e) => `${e.occurredAt.getTime()}/${e.id}`));
          if (page.length < 3) break;
          after = { createdAt: page[2]!.occurredAt, id: page[2]!.id };
        }
        out.push(ids);
      }
      return out;
    };
    expect(before.flat(), 'every entry is listed four times: unfiltered, by organisation, by kind, and by both').to.have.length(kinds.length * 4);
    expect(await store.migrate()).to.deep.equal(['0012_audit_rare_kind_index', '0013_redis_identity', '0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
    expect(await answers()).to.deep.equal(before);
    expect(await indexNames(store, 'audit_entries')).to.not.include('audit_entries_kind_occurred_at_id');
  });

  it('C-40, C-41: the kind index holds no api_key_issued or api_key_revoked entry (SQLite: its cells counted; Postgres: its predicate)', async () => {
    store = await target.open();
    const org = 'b5000000-0000-4000-8000-000000000000';
    const entry = (n: number, kind: AuditEntry['kind']): AuditEntry => ({
      id: `c5000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
      kind,
      occurredAt: new Date(n),
      organisationId: org,
      keyId: null,
      keyPrefix: null,
      actor: { type: 'operator' },
    });
    const appended: AuditEntry['kind'][] = [];
    for (let n = 0; n < 40; n++) appended.push(n % 10 === 9 ? 'member_added' : n % 2 === 0 ? 'api_key_issued' : 'api_key_revoked');
    for (const [n, kind] of appended.entries()) await store.stores.audit.append(entry(n, kind));
    const rare = appended.filter((k) => k === 'member_added').length;
    if (store.dialect === 'sqlite') {
      // Every key of an index b-tree is one cell, on an interior or a leaf page.
      const cells = async (index: string): Promise<number> =>
        Number(((await store.knex.raw('SELECT coalesce(sum(ncell), 0) AS n FROM dbstat WHERE name = ?', [index])) as Array<{ n: number }>)[0]!.n);
      expect(await cells('audit_entries_rare_kind_occurred_at_id'), 'one cell per member_added entry').to.equal(rare);
      expect(await cells('audit_entries_occurred_at_id'), 'the global index holds them all').to.equal(appended.length);
    } else {
      const result = (await store.knex.raw(
        `SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'audit_entries_rare_kind_occurred_at_id'`,
      )) as { rows: Array<{ indexdef: string }> };
      expect(result.rows.map((r) => r.indexdef)).to.deep.equal([
        `CREATE INDEX audit_entries_rare_kind_occurred_at_id ON ${await currentSchema(store)}.audit_entries USING btree (kind, occurred_at, id) WHERE (kind <> ALL (ARRAY['api_key_issued'::text, 'api_key_revoked'::text]))`,
      ]);
    }
    expect((await store.stores.audit.list({ kind: 'member_added' }, { limit: 100, after: null })).map((e) => e.id)).to.have.length(rare);
  });

  /** Every index of audit_entries with its definition (SQLite: its SQL; Postgres: pg_indexes.indexdef). */
  async function auditIndexes(): Promise<Array<[string, string]>> {
    if (store.dialect === 'sqlite') {
      const rows = (await store.knex.raw(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit_entries' AND sql IS NOT NULL ORDER BY name`)) as Array<{ name: string; sql: string }>;
      return rows.map((r) => [r.name, r.sql]);
    }
    const result = (await store.knex.raw(
      `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'audit_entries' ORDER BY indexname`,
    )) as { rows: Array<{ indexname: string; indexdef: string }> };
    return result.rows.map((r) => [r.indexname, r.indexdef]);
  }

  /** The table's definition: SQLite its CREATE TABLE; Postgres its columns' nullability and its constraints. */
  async function auditTableDefinition(): Promise<string> {
    if (store.dialect === 'sqlite') {
      return ((await store.knex.raw(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'audit_entries'`)) as Array<{ sql: string }>)[0]!.sql;
    }
    const columns = (await store.knex.raw(
      `SELECT column_name, is_nullable FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'audit_entries' ORDER BY column_name`,
    )) as { rows: Array<{ column_name: string; is_nullable: string }> };
    const checks = (await store.knex.raw(
      `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = 'audit_entries'::regclass ORDER BY conname`,
    )) as { rows: Array<{ conname: string; def: string }> };
    return JSON.stringify([columns.rows, checks.rows]);
  }

  const org13 = 'b6000000-0000-4000-8000-000000000000';
  const entry13 = (n: number, kind: AuditEntry['kind'] = 'member_added', organisationId = org13): AuditEntry => ({
    id: `c6000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    kind,
    occurredAt: new Date(1000 + n),
    organisationId,
    keyId: null,
    keyPrefix: null,
    actor: { type: 'operator', name: 'ada' },
  });
  /** A row the service never writes: seq NULL, 0 or negative (a forged "revoked by security-team"). */
  const forged13 = (n: number, seq: number | null) => ({
    id: `c7000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    kind: 'api_key_revoked',
    occurred_at: 5000 + n,
    organisation_id: org13,
    key_id: null,
    key_prefix: null,
    actor_type: 'operator',
    actor_key_id: null,
    actor_name: 'security-team',
    seq,
    prev_hash: '0'.repeat(64),
    hash: 'f'.repeat(64),
  });

  it('C-120: 0014_audit_seq_checks refuses a database holding audit rows outside the chain (seq NULL, 0, negative), names them, and changes nothing', async () => {
    await openBefore('0014_audit_seq_checks');
    await appendRows([entry13(1), entry13(2)]);
    const forged = [forged13(1, null), forged13(2, 0), forged13(3, -1)];
    await store.knex('audit_entries').insert(forged);
    const definition = await auditTableDefinition();
    const indexes = await auditIndexes();

    const error = await rejection(store.migrate());
    expect(error).to.be.instanceOf(Error);
    const message = (error as Error).message;
    expect(message).to.include('0014_audit_seq_checks refused: audit_entries holds 3 row(s) outside the hash chain');
    for (const row of forged) expect(message).to.include(row.id);
    expect(message).to.include('Nothing was changed');
    expect(await store.pendingMigrations()).to.deep.equal(['0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
    expect(await auditTableDefinition()).to.equal(definition);
    expect(await auditIndexes()).to.deep.equal(indexes);
    expect(await store.knex('audit_entries').count({ n: '*' }).first().then((r) => Number(r?.n))).to.equal(5);

    // Once the operator has removed them (keeping a copy), the migration runs.
    await store.knex('audit_entries').whereIn('id', forged.map((r) => r.id)).delete();
    expect(await store.migrate()).to.deep.equal(['0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
  });

  it('C-120: 0014_audit_seq_checks keeps every entry and every index (the partial kind index of 0012 included); the schema then refuses a seq that is NULL, 0, negative (or, on SQLite, not an integer)', async () => {
    await openBefore('0014_audit_seq_checks');
    const orgs = [org13, 'b6000000-0000-4000-8000-00000000000b'];
    const entries = await appendRows(AUDIT_KINDS.map((kind, n) => entry13(n, kind, orgs[n % 2])));
    const listings = async () => ({
      all: (await store.stores.audit.list({}, { limit: 1000, after: null })).map(auditRecord),
      byKind: (await store.stores.audit.list({ kind: 'member_added' }, { limit: 1000, after: null })).map((e) => e.id),
      heads: await store.stores.audit.heads(),
    });
    // What the listings answered before: the entries as written, in (occurred_at, id) order.
    const before = {
      all: (listed(entries) as ChainedAuditEntry[]).map(auditRecord),
      byKind: listed(entries.filter((e) => e.kind === 'member_added')).map((e) => e.id),
      heads: await store.stores.audit.heads(),
    };
    expect(before.heads).to.have.length(2);
    const indexes = await auditIndexes();
    expect(indexes.map(([name]) => name)).to.include('audit_entries_rare_kind_occurred_at_id');

    expect(await store.migrate()).to.deep.equal(['0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
    expect(await listings()).to.deep.equal(before);
    expect(await auditIndexes(), 'the same indexes, with the same definitions').to.deep.equal(indexes);
    const next = await store.stores.audit.append(entry13(99, 'member_added', orgs[0]));
    expect(next.seq, 'appends continue the chain').to.equal(before.heads.find((h) => h.organisationId === orgs[0])!.seq + 1);

    const refusedSeqs: unknown[] = [null, 0, -1, ...(store.dialect === 'sqlite' ? ['x', 2.5] : [])];
    for (const [n, seq] of refusedSeqs.entries()) {
      expect(await rejection(store.knex('audit_entries').insert(forged13(10 + n, seq as number | null))), `seq ${String(seq)}`).to.be.instanceOf(Error);
    }
    expect(await rejection(store.knex('audit_entries').insert({ ...forged13(20, 500), hash: null })), 'hash NULL').to.be.instanceOf(Error);
    expect(await rejection(store.knex('audit_entries').insert({ ...forged13(21, 501), prev_hash: null })), 'prev_hash NULL').to.be.instanceOf(Error);
    expect(await store.stores.audit.outsideChain()).to.deep.equal([]);
  });

  it('C-240: 0015_organisation_rate_limit adds organisations.rate_limit_per_minute; organisations created before it read back with no limit of their own (the default applies)', async () => {
    await openBefore('0015_organisation_rate_limit');
    const id = 'c2400000-0000-4000-8000-000000000001';
    await store.knex('organisations').insert({ id, name: 'Before plans', slug: 'before-plans', industry_section: null, is_system: false, created_at: 1, updated_at: 1 });
    expect(await store.migrate()).to.deep.equal(['0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
    expect((await store.stores.organisations.findById(id))?.rateLimitPerMinute).to.equal(null);
    await store.unitOfWork.changeCredentials([id], (s) => s.organisations.update(id, { rateLimitPerMinute: 1_000_000, updatedAt: new Date(2) }));
    expect((await store.stores.organisations.findById(id))?.rateLimitPerMinute).to.equal(1_000_000);
  });

  it('migrations are forward-only: rolling back is refused and changes nothing', async () => {
    store = await target.open();
    let error: unknown;
    try {
      await store.knex.migrate.down({ migrationSource: sqlMigrationSource(store.dialect), tableName: MIGRATIONS_TABLE });
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(Error);
    expect((error as Error).message).to.match(/forward-only/);
    expect(await store.pendingMigrations()).to.deep.equal([]);
    for (const t of TABLES) expect(await hasTable(store, t), t).to.equal(true);
  });
});
