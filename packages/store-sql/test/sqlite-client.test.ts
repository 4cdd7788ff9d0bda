/**
 * The SQLite connection of a store from a `sqlite:` URL (src/sqlite/database.ts): one better-sqlite3
 * connection the store owns, driven through better-sqlite3's public API, and shared with knex
 * (migrations, SqlStore.knex) through knex's documented `connectionPool` option. These tests pin
 * what it must keep doing:
 *  - C-17: a unit of work takes the write lock when it starts (BEGIN IMMEDIATE), so it never meets
 *    SQLITE_BUSY on its first write (a deferred BEGIN would take it only then);
 *  - each statement text is prepared once per connection (the statement cache), not on every call,
 *    and a cached statement follows schema changes;
 *  - one line in front of the connection: a single statement, knex and another unit of work wait
 *    for an open unit of work (never run inside it), within the budget (C-17);
 *  - onStatement reports a unit of work's BEGIN IMMEDIATE, COMMIT and ROLLBACK, as on Postgres.
 * On a knex that ignored `connectionPool`, SqlStore.knex would have no connection: the knex tests
 * here fail.
 */
import { createRequire } from 'node:module';
import { expect } from 'chai';
import { UnavailableError } from '@cos/core';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
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

describe('the SQLite connection of a store from a URL (src/sqlite/database.ts)', () => {
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

  it('a cached statement of the store follows schema changes (added column, dropped and recreated table)', async () => {
    const store = storeOn('sqlite::memory:');
    await store.query('CREATE TABLE t (a integer)');
    await store.query('INSERT INTO t VALUES (1)');
    expect(await store.query('SELECT * FROM t')).to.deep.equal([{ a: 1 }]);
    await store.query('ALTER TABLE t ADD COLUMN b integer DEFAULT 7');
    expect(await store.query('SELECT * FROM t')).to.deep.equal([{ a: 1, b: 7 }]);
    await store.query('DROP TABLE t');
    await store.query('CREATE TABLE t (c text)');
    await store.query("INSERT INTO t VALUES ('x')");
    expect(await store.query('SELECT * FROM t')).to.deep.equal([{ c: 'x' }]);
  });

  it('binds booleans as 1/0 and Dates as epoch ms, as knex did', async () => {
    const store = storeOn('sqlite::memory:');
    expect(await store.query('SELECT ? AS t, ? AS f, ? AS d', [true, false, new Date(1_234)])).to.deep.equal([{ t: 1, f: 0, d: 1_234 }]);
  });

  for (const url of ['sqlite::memory:', 'file']) {
    describe(url === 'file' ? 'on a file' : `on ${url}`, () => {
      const open = (): SqlStore => storeOn(url === 'file' ? `sqlite:${file(`line-${Math.random().toString(36).slice(2)}.sqlite`)}` : url);

      it('C-40: a single statement, a statement through SqlStore.knex and another unit of work wait for an open unit of work, and see its writes only once committed', async () => {
        const store = open();
        await store.migrate();
        const first = organisation();
        let release!: () => void;
        const gate = new Promise<void>((resolve) => (release = resolve));
        let inserted!: () => void;
        const inside = new Promise<void>((resolve) => (inserted = resolve));
        const work = store.unitOfWork.run(async (tx) => {
          await tx.organisations.create(first);
          inserted();
          await gate;
        });
        await inside;
        const order: string[] = [];
        const list = store.stores.organisations.list({ limit: 10, after: null }).then((rows) => (order.push('list'), rows));
        const viaKnex = (store.knex.raw('SELECT count(*) AS n FROM organisations') as Promise<Array<{ n: number }>>).then((rows) => (order.push('knex'), rows));
        const second = store.unitOfWork.run(async (tx) => {
          order.push('second');
          return tx.organisations.list({ limit: 10, after: null });
        });
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(order, 'nothing ran inside the open unit of work').to.deep.equal([]);
        order.push('commit');
        release();
        await work;
        expect((await list).map((o) => o.id)).to.deep.equal([first.id]);
        expect((await viaKnex)[0]!.n).to.equal(1);
        expect((await second).map((o) => o.id)).to.deep.equal([first.id]);
        expect(order[0], 'each waited for the commit').to.equal('commit');
        expect(order.slice(1)).to.have.members(['list', 'knex', 'second']);
      });
    });
  }

  it("C-17: a unit of work and a single statement that wait in line past the budget answer UnavailableError in time; the store resumes", async () => {
    const store = createSqlStore({ databaseUrl: 'sqlite::memory:', statementTimeoutMs: 200 });
    try {
      await store.migrate();
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let started!: () => void;
      const inside = new Promise<void>((resolve) => (started = resolve));
      const holder = store.unitOfWork.run(async () => {
        started();
        await gate;
      });
      await inside;
      const t0 = performance.now();
      const [unit, single] = await Promise.all([
        store.unitOfWork.run((tx) => tx.organisations.create(organisation())).then(() => null, (e: unknown) => e),
        store.stores.organisations.list({ limit: 1, after: null }).then(() => null, (e: unknown) => e),
      ]);
      const took = performance.now() - t0;
      expect(unit, String(unit)).to.be.instanceOf(UnavailableError);
      expect(single, String(single)).to.be.instanceOf(UnavailableError);
      expect(took, 'at the 200 ms budget').to.be.within(150, 1000);
      release();
      await holder;
      const o = organisation();
      await store.unitOfWork.run((tx) => tx.organisations.create(o));
      expect((await store.stores.organisations.findById(o.id))?.id, 'resumed').to.equal(o.id);
    } finally {
      await store.close();
    }
  });

  it('onStatement reports a unit of work\'s BEGIN IMMEDIATE and COMMIT, and ROLLBACK when it throws', async () => {
    const store = storeOn('sqlite::memory:');
    await store.migrate();
    const seen: string[] = [];
    const stop = store.onStatement((s) => void seen.push(s.sql.split(/\s+/, 2).join(' ')));
    try {
      await store.unitOfWork.run((tx) => tx.organisations.create(organisation()));
      const failed = await store.unitOfWork
        .run(async (tx) => {
          await tx.organisations.create(organisation());
          throw new Error('no');
        })
        .then(() => null, (e: unknown) => e);
      expect((failed as Error).message).to.equal('no');
    } finally {
      stop();
    }
    expect(seen).to.deep.equal(['BEGIN IMMEDIATE', 'INSERT INTO', 'COMMIT', 'BEGIN IMMEDIATE', 'INSERT INTO', 'ROLLBACK']);
    expect(await store.stores.organisations.list({ limit: 10, after: null }), 'the failed one left nothing').to.have.length(1);
  });

  it('close() waits for an open unit of work to commit, then refuses calls with UnavailableError', async () => {
    const path = file('close.sqlite');
    const store = storeOn(`sqlite:${path}`);
    await store.migrate();
    const o = organisation();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const inside = new Promise<void>((resolve) => (started = resolve));
    const work = store.unitOfWork.run(async (tx) => {
      started();
      await gate;
      await tx.organisations.create(o);
    });
    await inside;
    let closed = false;
    const closing = store.close().then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(closed, 'close() waits for the unit of work').to.equal(false);
    release();
    await work;
    await closing;
    const after = await store.stores.organisations.list({ limit: 1, after: null }).then(() => null, (e: unknown) => e);
    expect(after, String(after)).to.be.instanceOf(UnavailableError);
    const reopened = storeOn(`sqlite:${path}`);
    expect((await reopened.stores.organisations.findById(o.id))?.id, 'committed before the close').to.equal(o.id);
  });
});
