/**
 * The SQLite knex client of a store from a `sqlite:` URL (src/sqlite/client.ts) extends knex
 * internals that are not knex's documented API. These tests fail on a knex where that extension no
 * longer takes effect:
 *  - C-17: a unit of work takes the write lock when it starts (BEGIN IMMEDIATE), so it never meets
 *    SQLITE_BUSY on its first write (a deferred BEGIN would take it only then);
 *  - each statement text is prepared once per connection (the statement cache), not on every call.
 */
import { createRequire } from 'node:module';
import { expect } from 'chai';
import { organisation } from './support/fixtures.js';
import { useSqliteFiles } from './support/sqlite-files.js';

interface Statement {
  run(): unknown;
}
interface PlainDatabase {
  prepare(sql: string): Statement;
  close(): void;
}
type DatabaseClass = (new (filename: string, options?: { timeout?: number }) => PlainDatabase) & { prototype: PlainDatabase };
const Database = createRequire(import.meta.url)('better-sqlite3') as DatabaseClass;

describe('the SQLite knex client (src/sqlite/client.ts) on this knex', () => {
  const { file, storeOn } = useSqliteFiles('cos-store-sql-client-');

  it('C-17: a unit of work holds the write lock from its start (BEGIN IMMEDIATE), before its first write', async () => {
    const path = file('immediate.sqlite');
    const store = storeOn(`sqlite:${path}`);
    await store.migrate();
    const org = organisation();
    await store.stores.organisations.create(org);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const inside = new Promise<void>((resolve) => (started = resolve));
    const work = store.unitOfWork.run(async (tx) => {
      await tx.organisations.findById(org.id); // reads only, so far
      started();
      await gate;
    });
    await inside;
    const other = new Database(path, { timeout: 0 });
    try {
      expect(() => other.prepare('BEGIN IMMEDIATE').run(), 'another connection cannot take the write lock').to.throw(/locked|busy/i);
      release();
      await work;
      other.prepare('BEGIN IMMEDIATE').run();
      other.prepare('ROLLBACK').run();
    } finally {
      release();
      other.close();
    }
  });

  it('prepares each statement text once per connection, not on every call', async () => {
    const store = storeOn('sqlite::memory:');
    await store.migrate();
    await store.stores.organisations.create(organisation());
    const prepared: string[] = [];
    const original = Database.prototype.prepare;
    Database.prototype.prepare = function (this: PlainDatabase, sql: string): Statement {
      prepared.push(sql);
      return original.call(this, sql);
    };
    try {
      for (let i = 0; i < 5; i += 1) expect(await store.stores.organisations.list({ limit: 10, after: null })).to.have.length(1);
    } finally {
      Database.prototype.prepare = original;
    }
    expect(prepared.filter((sql) => /FROM organisations/.test(sql)), prepared.join('\n')).to.have.length(1);
  });
});
