/**
 * Postgres: parameterised statements run as named prepared statements by default (parsed and
 * planned once per connection), and not at all with `preparedStatements: false` (for poolers such
 * as PgBouncer in transaction mode before 1.21). Checked on the server: pg_prepared_statements
 * lists what the session holds.
 */
import { expect } from 'chai';
import type { SqlStore } from '@cos/store-sql';
import { issuedKey, organisation } from './support/fixtures.js';
import { withPostgres } from './support/targets.js';

/** The prepared statements of the session a one-connection store uses. */
async function preparedOf(store: SqlStore): Promise<string[]> {
  const rows = await store.query<{ statement: string }>('SELECT statement FROM pg_prepared_statements ORDER BY prepare_time');
  return rows.map((r) => r.statement);
}

withPostgres('Postgres prepared statements (DATABASE_PREPARED_STATEMENTS)', (_url, target) => {
  it('by default the credential lookup is a prepared statement of the session, reused on every call', async () => {
    const store = await target.open({ poolMax: 1 });
    try {
      const org = organisation();
      await store.stores.organisations.create(org);
      const { key } = issuedKey(org.id);
      await store.stores.apiKeys.insert(key);
      for (let i = 0; i < 3; i++) expect((await store.stores.apiKeys.findCredential(key.digest))?.key.id).to.equal(key.id);
      const prepared = await preparedOf(store);
      const lookups = prepared.filter((sql) => /WHERE k\.digest = \$1/.test(sql));
      expect(lookups, prepared.join('\n')).to.have.length(1);
      // Another digest reuses the same statement (values are bindings, never part of the text).
      expect(await store.stores.apiKeys.findCredential('0'.repeat(64))).to.equal(null);
      expect((await preparedOf(store)).filter((sql) => /WHERE k\.digest = \$1/.test(sql))).to.have.length(1);
    } finally {
      await store.close();
    }
  });

  it('with preparedStatements: false the session holds no prepared statement, and every store call still works', async () => {
    const store = await target.open({ poolMax: 1, preparedStatements: false });
    try {
      const org = organisation();
      await store.stores.organisations.create(org);
      const { key } = issuedKey(org.id);
      await store.stores.apiKeys.insert(key);
      expect((await store.stores.apiKeys.findCredential(key.digest))?.organisation.id).to.equal(org.id);
      expect(await store.stores.organisations.findById(org.id)).to.deep.equal(org);
      await store.unitOfWork.changeCredentials([org.id], (tx) => tx.apiKeys.revoke(org.id, key.id, new Date(key.createdAt.getTime() + 1)));
      expect((await store.stores.apiKeys.findCredential(key.digest))?.key.revokedAt).to.not.equal(null);
      expect(await preparedOf(store)).to.deep.equal([]);
    } finally {
      await store.close();
    }
  });
});
