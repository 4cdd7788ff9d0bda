/** Migrations as code: forward-only, idempotent, the same schema on both dialects. */
import { MIGRATIONS, MIGRATIONS_TABLE, sqlMigrationSource, type SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import { forEachTarget, TABLES } from './support/targets.js';

async function hasTable(store: SqlStore, name: string): Promise<boolean> {
  return store.knex.schema.hasTable(name);
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

forEachTarget('migrations', (target) => {
  let store: SqlStore;
  afterEach(() => store?.close());

  it('lists every migration as pending on an empty database, without creating anything', async () => {
    store = await target.openUnmigrated();
    expect(await store.pendingMigrations()).to.deep.equal(MIGRATIONS.map((m) => m.name));
    expect(await hasTable(store, MIGRATIONS_TABLE), 'pendingMigrations is read-only').to.equal(false);
    for (const t of TABLES) expect(await hasTable(store, t), t).to.equal(false);
  });

  it('migrate() applies the pending migrations and returns their names; then nothing is pending', async () => {
    store = await target.openUnmigrated();
    expect(await store.migrate()).to.deep.equal(['0001_initial']);
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

  it('C-6, C-13, C-31: creates the unique and keyset indexes', async () => {
    store = await target.open();
    expect(await indexNames(store, 'organisations')).to.deep.equal([
      'organisations_created_at_id',
      'organisations_slug_unique',
      'organisations_system_created_at_id',
    ]);
    expect(await indexNames(store, 'members')).to.deep.equal(['members_organisation_created_at_id', 'members_organisation_email_unique']);
    expect(await indexNames(store, 'api_keys')).to.deep.equal(['api_keys_digest_unique', 'api_keys_organisation_created_at_id']);
    expect(await indexNames(store, 'audit_entries')).to.deep.equal([
      'audit_entries_kind_occurred_at_id',
      'audit_entries_occurred_at_id',
      'audit_entries_organisation_occurred_at_id',
    ]);
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
