/**
 * C-17 on the Postgres path of a store from a URL (postgres/database.ts: a pg.Pool the store owns,
 * one deadline per call and per unit of work), pinned through what the store shows: its sessions
 * (backend pids through SqlStore.query) and the statements it sends (SqlStore.onStatement).
 *
 * The client-side deadline is made to fire before the server's statement_timeout (same budget, but
 * counted from the statement's arrival) by making the statement arrive late within its deadline:
 * a single statement first waits for the pool's only connection (held for half the budget); a unit
 * of work's callback waits half the budget before its UPDATE. The statement then has half the
 * budget left, and the server is still working on it when the store answers. Every margin is half
 * the budget: the hold ends that long before its own deadline, and the server's timeout comes that
 * long after the store's answer, so a loaded machine's late timers do not change the outcome.
 *  - A connection whose statement outlived the deadline is disposed of, never handed out again: the
 *    next call runs at once on a new session instead of queueing behind the abandoned statement.
 *  - A unit of work that timed out sends no ROLLBACK (it would only queue behind the unanswered
 *    statement); its session is closed, so its transaction can never commit.
 *  - A unit of work that failed with a server error (a conflict) rolls back and keeps its session.
 */
import { ConflictError, UnavailableError } from '@cos/core';
import type { SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import knexFactory, { type Knex } from 'knex';
import { organisation } from './support/fixtures.js';
import { withPostgres } from './support/targets.js';
import { holdTheConnection, outcomeOf } from './support/timing.js';
import { storePorts } from '@cos/core/testing/contracts';

const BUDGET_MS = 500;
const HOLD_MS = BUDGET_MS / 2;
const SLACK_MS = 300;

async function pidOf(store: SqlStore): Promise<number> {
  return (await store.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'))[0]!.pid;
}


/** Waits until no backend waits for a lock held by `pid` (the server gave the abandoned statement up). */
async function untilNothingWaitsOn(store: SqlStore, pid: number, withinMs = 5000): Promise<void> {
  const started = performance.now();
  while ((await store.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))', [pid]))[0]!.n > 0) {
    if (performance.now() - started > withinMs) throw new Error(`statements still wait for backend ${pid} after ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

withPostgres('C-17: the Postgres deadline of a store from a URL (pg pool owned by the store)', (url, target) => {
  let store: SqlStore;
  let blocker: Knex;
  let lock: Knex.Transaction;
  let blockerPid: number;
  const org = organisation();

  beforeEach(async () => {
    store = await target.open({ poolMax: 1, statementTimeoutMs: BUDGET_MS });
    await store.stores.organisations.create(org);
    const schema = (await store.query<{ s: string }>('SELECT current_schema() AS s'))[0]!.s;
    blocker = knexFactory({ client: 'pg', connection: url, searchPath: [schema], pool: { min: 0, max: 1 } });
    // Another session holds the organisation's row: an UPDATE of it waits on the server.
    lock = await blocker.transaction();
    await lock.raw('SELECT id FROM organisations WHERE id = ? FOR UPDATE', [org.id]);
    blockerPid = ((await lock.raw('SELECT pg_backend_pid() AS pid')) as { rows: Array<{ pid: number }> }).rows[0]!.pid;
  });

  afterEach(async () => {
    if (!lock.isCompleted()) await lock.rollback();
    await blocker.destroy();
    await store.close();
  });

  it('C-17: a statement that outlives the deadline (pool wait included) answers UnavailableError at the deadline, and its connection is never reused: the next call answers at once on a new session; the abandoned UPDATE never applies', async () => {
    const before = await pidOf(store);
    const { released } = await holdTheConnection(store, HOLD_MS / 1000);
    const outcome = await outcomeOf(() => storePorts(store).organisations.update(org.id, { name: 'abandoned', updatedAt: org.updatedAt }));
    await released;
    expect(outcome.error, 'the blocked update').to.be.instanceOf(UnavailableError);
    expect(outcome.elapsedMs, 'answered at the deadline, counted from the pool wait').to.be.within(BUDGET_MS - 50, BUDGET_MS + SLACK_MS);

    // The server still works on the abandoned UPDATE (its statement_timeout counts from its arrival).
    const started = performance.now();
    const after = await pidOf(store);
    const elapsed = performance.now() - started;
    expect(after, 'a new session').to.not.equal(before);
    expect(elapsed, 'the next call did not queue behind the abandoned statement').to.be.below(HOLD_MS);

    await untilNothingWaitsOn(store, blockerPid);
    await lock.rollback();
    expect((await store.stores.organisations.findById(org.id))?.name, 'the abandoned update never applied').to.equal(org.name);
  });

  it('C-17: a unit of work that outlives the deadline sends no ROLLBACK and loses its session; one that fails with a conflict rolls back and keeps it', async () => {
    const statements: string[] = [];
    const stop = store.onStatement((s) => void statements.push(s.sql.split(/\s+/, 3).join(' ')));
    try {
      const before = await pidOf(store);
      statements.length = 0;
      const outcome = await outcomeOf(() =>
        store.unitOfWork.changeCredentials([org.id], async (tx) => {
          // The unit's deadline runs from its start: the UPDATE arrives with half the budget left.
          await new Promise((resolve) => setTimeout(resolve, BUDGET_MS / 2));
          await tx.organisations.update(org.id, { name: 'abandoned', updatedAt: org.updatedAt });
        }),
      );
      expect(outcome.error, 'the blocked unit of work').to.be.instanceOf(UnavailableError);
      expect(outcome.elapsedMs, 'answered at the deadline').to.be.within(BUDGET_MS - 50, BUDGET_MS + SLACK_MS);
      expect(statements, 'no ROLLBACK after the timeout').to.deep.equal(['BEGIN', 'UPDATE organisations SET']);
      const fresh = await pidOf(store);
      expect(fresh, 'the timed-out session was disposed of').to.not.equal(before);

      await untilNothingWaitsOn(store, blockerPid);
      await lock.rollback();
      statements.length = 0;
      const conflict = await outcomeOf(() => store.unitOfWork.run((tx) => tx.organisations.create(organisation({ slug: org.slug }))));
      expect(conflict.error, 'a duplicate slug').to.be.instanceOf(ConflictError);
      expect(statements, 'rolled back').to.deep.equal(['BEGIN', 'INSERT INTO organisations', 'ROLLBACK']);
      expect(await pidOf(store), 'the healthy session is kept').to.equal(fresh);
      expect((await store.stores.organisations.findById(org.id))?.name, 'the timed-out unit of work never committed').to.equal(org.name);
    } finally {
      stop();
    }
  });
});
