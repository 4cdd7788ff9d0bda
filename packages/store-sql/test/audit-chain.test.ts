/**
 * The audit chain under concurrent writers on real databases (C-63): several stores, each with its
 * own connection pool (as several service instances have), append to one organisation at once, in
 * units of work and alone; the chain never forks and never reuses or skips a seq.
 */
import { auditRecord, ChainVerifier, type AuditEntry, type ChainedAuditEntry } from '@cos/core';
import { newAuditEntry } from '@cos/core/testing/contracts';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import knexFactory from 'knex';
import { testSchemaName } from './support/targets.js';

const ORG = 'a8000000-0000-4000-8000-000000000000';

function entry(i: number, writer: number): AuditEntry {
  return newAuditEntry(ORG, { occurredAt: new Date(Date.UTC(2026, 5, 10) + i), actor: { type: 'operator', name: `writer ${writer}` } });
}

async function wholeChain(store: SqlStore): Promise<ChainedAuditEntry[]> {
  const out: ChainedAuditEntry[] = [];
  for (;;) {
    const page = await store.stores.audit.chain(ORG, { afterSeq: out.length === 0 ? 0 : out[out.length - 1]!.seq, limit: 500 });
    if (page.length === 0) return out;
    out.push(...page);
  }
}

/** `writers` stores append `each` entries apiece, all at once: half in units of work (two entries each), half alone. */
async function hammer(stores: readonly SqlStore[], each: number): Promise<ChainedAuditEntry[]> {
  const appended: Array<Promise<ChainedAuditEntry[]>> = [];
  stores.forEach((store, w) => {
    for (let i = 0; i < each; i += 2) {
      if (i % 4 === 0) {
        appended.push(
          store.unitOfWork.run(async (s) => [await s.audit.append(entry(i, w)), await s.audit.append(entry(i + 1, w))]),
        );
      } else {
        appended.push(Promise.all([store.stores.audit.append(entry(i, w)), store.stores.audit.append(entry(i + 1, w))]));
      }
    }
  });
  return (await Promise.all(appended)).flat();
}

function expectOneChain(chain: readonly ChainedAuditEntry[], appended: readonly ChainedAuditEntry[], total: number): void {
  expect(chain.map((e) => e.seq)).to.deep.equal(Array.from({ length: total }, (_, i) => i + 1), 'seq 1..n without a gap or a repeat');
  expect(new Set(chain.map((e) => e.prevHash)).size, 'no two entries name the same predecessor (no fork)').to.equal(total);
  // What each writer was told is what was stored.
  const byId = new Map(chain.map((e) => [e.id, e]));
  for (const a of appended) expect(byId.get(a.id)).to.deep.equal(a);
  const v = new ChainVerifier(ORG);
  for (const e of chain) v.push(auditRecord(e));
  expect(v.finish()).to.include({ status: 'ok', entries: total });
}

describe('audit chain: concurrent writers (C-63)', function () {
  this.timeout(60_000);

  const url = process.env.TEST_DATABASE_URL;
  (url ? it : it.skip)('C-63: four Postgres pools appending to one organisation at once never fork the chain or reuse a seq', async () => {
    const schema = testSchemaName();
    const admin = knexFactory({ client: 'pg', connection: url!, pool: { min: 0, max: 1 } });
    await admin.raw('CREATE SCHEMA ??', [schema]);
    // Every append waits in line for the organisation's chain: on a loaded machine the last of 80
    // queued transactions may wait longer than the 2 s default budget. The subject here is the
    // chain, not the budget (C-17 has its own tests), so the budget is generous.
    const stores = Array.from({ length: 4 }, () => createSqlStore({ databaseUrl: url!, schema, poolMax: 4, statementTimeoutMs: 15_000 }));
    try {
      await stores[0]!.migrate();
      const appended = await hammer(stores, 40);
      expectOneChain(await wholeChain(stores[1]!), appended, 160);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
      await admin.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
      await admin.destroy();
    }
  });

  it('C-63: three SQLite stores (connections) on one file appending at once never fork the chain or reuse a seq', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cos-audit-chain-'));
    const databaseUrl = `sqlite:${join(dir, 'cos.sqlite')}`;
    const first = createSqlStore({ databaseUrl });
    await first.migrate();
    const stores = [first, createSqlStore({ databaseUrl }), createSqlStore({ databaseUrl })];
    try {
      const appended = await hammer(stores, 40);
      expectOneChain(await wholeChain(stores[2]!), appended, 120);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('C-63: SQLite: a unit of work that appended and rolled back leaves the head where it was; two appends in one unit of work link to each other', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cos-audit-rollback-'));
    const store = createSqlStore({ databaseUrl: `sqlite:${join(dir, 'cos.sqlite')}` });
    try {
      await store.migrate();
      const appended = [await store.stores.audit.append(entry(0, 1))];
      const failed = await store.unitOfWork
        .run(async (tx) => {
          expect((await tx.audit.append(entry(1, 1))).seq).to.equal(2);
          expect((await tx.audit.append(entry(2, 1))).seq, 'after its own uncommitted append').to.equal(3);
          throw new Error('rolled back');
        })
        .then(() => null, (e: unknown) => e);
      expect((failed as Error).message).to.equal('rolled back');
      appended.push(await store.stores.audit.append(entry(3, 1)));
      appended.push(...(await store.unitOfWork.run(async (tx) => [await tx.audit.append(entry(4, 1)), await tx.audit.append(entry(5, 1))])));
      appended.push(await store.stores.audit.append(entry(6, 1)));
      expect(appended.map((e) => e.seq)).to.deep.equal([1, 2, 3, 4, 5]);
      expectOneChain(await wholeChain(store), appended, 5);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
