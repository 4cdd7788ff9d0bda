/**
 * C-17: when the store cannot be reached or does not answer within the statement timeout, every
 * call rejects with the core's UnavailableError (503 SERVICE_UNAVAILABLE) within about 2 s, nothing
 * is half-written, and service resumes by itself when the store returns.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UnavailableError } from '@cos/core';
import { CapturingLogger } from '@cos/core/testing';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import knexFactory from 'knex';
import { issuedKey, organisation } from './support/fixtures.js';
import { withPostgres } from './support/targets.js';
import { storePorts } from '@cos/core/testing/contracts';

async function rejectsUnavailableWithin(label: string, call: () => Promise<unknown>, withinMs: number): Promise<void> {
  const started = performance.now();
  let error: unknown;
  try {
    await call();
  } catch (e) {
    error = e;
  }
  const elapsed = performance.now() - started;
  expect(error, `${label} rejects`).to.be.instanceOf(UnavailableError);
  expect((error as UnavailableError).code).to.equal('SERVICE_UNAVAILABLE');
  expect(elapsed, `${label} settles within ${withinMs} ms`).to.be.below(withinMs);
}

function everyOperation(store: SqlStore): Array<[string, () => Promise<unknown>]> {
  const o = organisation();
  return [
    ['organisations.findById', () => store.stores.organisations.findById(o.id)],
    ['organisations.create', () => store.stores.organisations.create(o)],
    ['organisations.list', () => store.stores.organisations.list({ limit: 10, after: null })],
    ['members.add', () => store.stores.members.add({ id: o.id, organisationId: o.id, email: 'a@b.co', createdAt: o.createdAt })],
    ['apiKeys.findCredential', () => store.stores.apiKeys.findCredential('0'.repeat(64))],
    ['apiKeys.countActive', () => store.stores.apiKeys.countActive(o.id, o.createdAt)],
    ['audit.list', () => store.stores.audit.list({}, { limit: 10, after: null })],
    ['unitOfWork.run', () => store.unitOfWork.run((tx) => tx.organisations.create(o))],
    ['health.ping', () => store.health.ping()],
    ['pendingMigrations', () => store.pendingMigrations()],
    ['migrate', () => store.migrate()],
  ];
}

describe('C-17: store unavailable', () => {
  it('C-17: a refused Postgres connection (127.0.0.1:1) gives UnavailableError on every operation within 2 s', async () => {
    const store = createSqlStore({ databaseUrl: 'postgres://postgres@127.0.0.1:1/test' });
    try {
      for (const [label, call] of everyOperation(store)) await rejectsUnavailableWithin(label, call, 2000);
    } finally {
      await store.close();
    }
  });

  it('C-17: during an outage the store\'s calls log one throttled warning and nothing per failed connection attempt; the knex of SqlStore.knex logs its "Acquire connection error" through the service\'s logger, one line per 10 s without a stack', async () => {
    const logger = new CapturingLogger();
    const store = createSqlStore({ databaseUrl: 'postgres://postgres@127.0.0.1:1/test', logger });
    try {
      for (let i = 0; i < 30; i += 1) await rejectsUnavailableWithin(`findById #${i}`, () => store.stores.organisations.findById(organisation().id), 2000);
      expect(
        logger.entries.map((e) => e.message),
        'everything logged for 30 failed store calls',
      ).to.deep.equal(['SQL store unavailable']);
      for (let i = 0; i < 30; i += 1) {
        let failed = false;
        await store.knex.raw('SELECT 1').catch(() => (failed = true));
        expect(failed, `knex.raw #${i} fails`).to.equal(true);
      }
    } finally {
      await store.close();
    }
    const knexLines = logger.entries.filter((e) => e.fields.component === 'knex');
    expect(knexLines.map((e) => e.message.split(':')[0]), 'knex lines for 30 failed acquires').to.deep.equal(['Acquire connection error']);
    expect(knexLines[0]!.message, 'no stack').to.not.include('\n');
    expect(logger.entries.filter((e) => e.message === 'SQL store unavailable')).to.have.length(1);
  });

  it('C-17: an unresolvable Postgres host gives UnavailableError within 2 s', async () => {
    const store = createSqlStore({ databaseUrl: 'postgres://postgres@cos-no-such-host.invalid:5432/test' });
    try {
      await rejectsUnavailableWithin('health.ping', () => store.health.ping(), 2000);
      await rejectsUnavailableWithin('findCredential', () => store.stores.apiKeys.findCredential('0'.repeat(64)), 2000);
    } finally {
      await store.close();
    }
  });

  it('C-17: a Postgres host that never answers (blackholed address) gives UnavailableError within the timeout', async () => {
    const store = createSqlStore({ databaseUrl: 'postgres://postgres@10.255.255.1:5432/test', statementTimeoutMs: 500 });
    try {
      await rejectsUnavailableWithin('health.ping', () => store.health.ping(), 2000);
    } finally {
      await store.close();
    }
  });

  describe('SQLite', () => {
    let dir: string;
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'cos-store-sql-busy-'));
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    it('C-17: a database locked by another process past the busy timeout gives UnavailableError; nothing half-written; resumes', async () => {
      const file = join(dir, 'locked.sqlite');
      const store = createSqlStore({ databaseUrl: `sqlite:${file}`, statementTimeoutMs: 200 });
      // Another connection (as another process would) holding the write lock.
      const other = knexFactory({ client: 'better-sqlite3', connection: { filename: file }, useNullAsDefault: true });
      try {
        await store.migrate();
        const org = organisation();
        await store.stores.organisations.create(org);
        const trx = await other.transaction();
        await trx.raw("UPDATE organisations SET name = 'held' WHERE id = ?", [org.id]);
        const key = issuedKey(org.id).key;
        await rejectsUnavailableWithin('apiKeys.insert', () => store.stores.apiKeys.insert(key), 2000);
        await rejectsUnavailableWithin(
          'unitOfWork.run',
          () =>
            store.unitOfWork.changeCredentials([org.id], async (tx) => {
              await tx.apiKeys.insert(key);
              await tx.apiKeys.revoke(org.id, key.id, org.createdAt);
            }),
          2000,
        );
        await trx.rollback();
        expect(await store.stores.apiKeys.findById(org.id, key.id), 'nothing half-written').to.equal(null);
        await store.stores.apiKeys.insert(key);
        expect((await store.stores.apiKeys.findById(org.id, key.id))?.id, 'resumed').to.equal(key.id);
      } finally {
        await other.destroy();
        await store.close();
      }
    });
  });
});

/** Waits until no backend waits for a lock held by `pid` (the server gave the blocked statements up). */
async function untilNothingWaitsOn(store: SqlStore, pid: number, withinMs = 5000): Promise<void> {
  const started = performance.now();
  for (;;) {
    const rows = await store.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))', [pid]);
    if (rows[0]!.n === 0) return;
    if (performance.now() - started > withinMs) throw new Error(`statements still wait for backend ${pid} after ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

withPostgres('C-17: Postgres stops answering', (url, target) => {
  it('C-17: sessions run with a 2 s statement timeout by default (and a bound on idle transactions)', async () => {
    const store = await target.open();
    try {
      // On the store's own sessions (the ones its calls run on).
      const show = async (name: string): Promise<unknown> => (await store.query(`SHOW ${name}`))[0]![name];
      expect(await show('statement_timeout')).to.equal('2s');
      expect(await show('idle_in_transaction_session_timeout')).to.equal('10s');
    } finally {
      await store.close();
    }
  });

  it('C-17: a statement blocked past the statement timeout gives UnavailableError; the unit of work leaves nothing behind; service resumes', async () => {
    const store = await target.open({ statementTimeoutMs: 300 });
    const schema = (await store.query<{ s: string }>('SELECT current_schema() AS s'))[0]!.s;
    const blocker = knexFactory({ client: 'pg', connection: url, searchPath: [schema], pool: { min: 0, max: 1 } });
    try {
      const org = organisation();
      await store.stores.organisations.create(org);
      const trx = await blocker.transaction();
      await trx.raw('SELECT id FROM organisations WHERE id = ? FOR UPDATE', [org.id]);
      const blockerPid = ((await trx.raw('SELECT pg_backend_pid() AS pid')) as { rows: Array<{ pid: number }> }).rows[0]!.pid;
      const key = issuedKey(org.id).key;
      await rejectsUnavailableWithin(
        'unitOfWork.run',
        () =>
          store.unitOfWork.changeCredentials([org.id], async (tx) => {
            await tx.apiKeys.insert(key); // its foreign-key check (KEY SHARE) waits for the FOR UPDATE lock
            await tx.organisations.update(org.id, { name: 'blocked', updatedAt: org.updatedAt });
          }),
        2000,
      );
      await rejectsUnavailableWithin('organisations.update', () => storePorts(store).organisations.update(org.id, { name: 'x', updatedAt: org.updatedAt }), 2000);
      // The store answers at its client-side deadline (counted from the pool wait) and closes those
      // sessions; Postgres gives the abandoned statements up by its own statement_timeout (the same
      // budget, counted from their arrival) a moment later. The lock is released only then: released
      // inside that window, an autocommit statement already answered 503 could still apply (a unit of
      // work cannot: its session is closed before any COMMIT is sent).
      await untilNothingWaitsOn(store, blockerPid);
      await trx.rollback();
      expect(await store.stores.apiKeys.findById(org.id, key.id), 'nothing half-written').to.equal(null);
      expect((await store.stores.organisations.findById(org.id))?.name).to.equal(org.name);
      expect((await storePorts(store).organisations.update(org.id, { name: 'after', updatedAt: org.updatedAt }))?.name, 'resumed').to.equal('after');
    } finally {
      await blocker.destroy();
      await store.close();
    }
  });

  it('C-17: a connection terminated by the server (57P01) does not wedge the store: it answers again by itself', async () => {
    const store = await target.open();
    const admin = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
    try {
      const pid = (await store.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'))[0]!.pid;
      await admin.raw('SELECT pg_terminate_backend(?)', [pid]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const outcomes: string[] = [];
      for (let i = 0; i < 3; i++) {
        try {
          await store.health.ping();
          outcomes.push('ok');
        } catch (e) {
          expect(e, 'a failure is reported as UnavailableError').to.be.instanceOf(UnavailableError);
          outcomes.push('unavailable');
        }
      }
      expect(outcomes[outcomes.length - 1]).to.equal('ok');
      await store.stores.organisations.create(organisation());
    } finally {
      await admin.destroy();
      await store.close();
    }
  });
});
