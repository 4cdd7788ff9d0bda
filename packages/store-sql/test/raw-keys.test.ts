/**
 * C-31: the database never holds a raw key. Keys are made with the core's real generateRawKey and
 * digestKey, stored through the stores (insert, revoke, audit), then every column of every table is
 * scanned for the raw keys and for their 48-character secret parts.
 */
import { cryptoRandom, digestKey, generateRawKey, generateWebhookSecret, newNotification } from '@cos/core';
import type { SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import { at, auditEntry, issuedKey, organisation } from './support/fixtures.js';
import { forEachTarget } from './support/targets.js';

async function tableNames(store: SqlStore): Promise<string[]> {
  if (store.dialect === 'sqlite') {
    const rows = (await store.knex.raw("SELECT name FROM sqlite_master WHERE type = 'table'")) as Array<{ name: string }>;
    return rows.map((r) => r.name);
  }
  const result = (await store.knex.raw('SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()')) as {
    rows: Array<{ table_name: string }>;
  };
  return result.rows.map((r) => r.table_name);
}

forEachTarget('C-31: no raw key at rest', (target) => {
  let store: SqlStore;
  beforeEach(async () => {
    store = await target.open();
  });
  afterEach(() => store.close());

  it('C-31, C-58, C-59: after issuing, revoking, reporting exposed and auditing keys, and notifying webhooks, no column of any table contains a raw key or its secret part', async () => {
    const org = organisation();
    await store.stores.organisations.create(org);
    const raws: string[] = [];
    for (let i = 0; i < 25; i++) {
      const { key, raw } = issuedKey(org.id, { label: `key ${i}`, expiresAt: i % 3 === 0 ? at(86_400_000) : null, createdAt: at(i) });
      raws.push(raw);
      await store.unitOfWork.run(async (tx) => {
        await tx.apiKeys.insert(key);
        await tx.audit.append(auditEntry(org.id, { kind: 'api_key_issued', keyId: key.id, keyPrefix: key.keyPrefix, occurredAt: at(i) }));
      });
      if (i % 4 === 1) {
        // A leaked key: exposure recorded, key revoked, exposed entry, webhook notification.
        const url = `https://gist.example.com/leak/${i}`;
        await store.unitOfWork.changeCredentials([org.id], async (tx) => {
          await tx.apiKeys.recordExposure(key.id, url, at(200 + i));
          await tx.apiKeys.revoke(org.id, key.id, at(200 + i));
          await tx.audit.append(
            auditEntry(org.id, {
              kind: 'api_key_exposed',
              keyId: key.id,
              keyPrefix: key.keyPrefix,
              occurredAt: at(200 + i),
              actor: { type: 'secret_scanning' },
              exposure: { type: 'cos_api_key', url, source: 'content' },
            }),
          );
          await tx.outbox.enqueue(
            newNotification(cryptoRandom, 'api_key.exposed', at(200 + i), {
              organisation_id: org.id,
              key_id: key.id,
              key_prefix: key.keyPrefix,
              label: key.label,
              url,
              source: 'content',
              cause: { type: 'secret_scanning' },
            }),
          );
        });
      }
      if (i % 4 === 0) {
        await store.unitOfWork.changeCredentials([org.id], async (tx) => {
          await tx.apiKeys.revoke(org.id, key.id, at(100 + i));
          await tx.audit.append(
            auditEntry(org.id, { kind: 'api_key_revoked', keyId: key.id, keyPrefix: key.keyPrefix, occurredAt: at(100 + i), actor: { type: 'api_key', keyId: key.id } }),
          );
        });
      }
    }

    await store.stores.webhooks.put({ organisationId: org.id, url: 'https://hooks.example.com/cos', secret: generateWebhookSecret(cryptoRandom), createdAt: at(0), updatedAt: at(0) });

    const tables = await tableNames(store);
    for (const t of ['organisations', 'members', 'api_keys', 'audit_entries', 'webhook_endpoints', 'webhook_outbox', 'api_key_exposures']) {
      expect(tables).to.include(t);
      expect(await store.knex(t).count({ n: '*' }), `${t} holds rows to scan`).to.satisfy((r: Array<{ n: unknown }>) => t === 'members' || Number(r[0]!.n) > 0);
    }
    let cells = 0;
    let digestsSeen = 0;
    for (const table of tables) {
      const rows = (await store.knex(table).select('*')) as Array<Record<string, unknown>>;
      for (const row of rows) {
        for (const [column, value] of Object.entries(row)) {
          if (value === null || value === undefined) continue;
          cells += 1;
          const text = Buffer.isBuffer(value) ? value.toString('latin1') : String(value);
          for (const raw of raws) {
            expect(text.includes(raw), `${table}.${column} holds a raw key`).to.equal(false);
            expect(text.includes(raw.slice(9)), `${table}.${column} holds a key's secret part`).to.equal(false);
          }
          if (table === 'api_keys' && column === 'digest') digestsSeen += raws.includes(text) ? 0 : 1;
        }
      }
    }
    expect(cells, 'the scan looked at stored data').to.be.greaterThan(25 * 8);
    expect(digestsSeen).to.equal(raws.length);
    const stored = (await store.knex('api_keys').select('digest')) as Array<{ digest: string }>;
    expect(stored.map((r) => r.digest).sort()).to.deep.equal(raws.map(digestKey).sort());
  });
});
