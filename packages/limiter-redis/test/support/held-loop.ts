/**
 * The credential cache's deadline and its late calls on a real Redis (plain or cluster), with the
 * test's own event loop held synchronously past REDIS_TIMEOUT_MS: the core (in-memory store, its
 * credential lookups counted) over RedisRateCounter, two organisations with a warm key each.
 *
 * - C-150: a reply that arrived while the loop was held is read before the deadline is decided, so
 *   it is not late: the request is served from the cache and counted.
 * - C-151: a call that reached Redis after its deadline (the loop held between the call and its
 *   write) costs its own lookup only: that request reads the store and fails open; the next one of
 *   the same key and those of the other organisation are served from the cache, no store read.
 */
import { tracingChannel } from 'node:diagnostics_channel';
import { expect } from 'chai';
import { OPERATOR, createCore, type ApiKeyStore, type Core } from '@cos/core';
import { createInMemoryStore } from '@cos/core/testing';
import { storePorts } from '@cos/core/testing/contracts';
import type { RedisRateCounter } from '@cos/limiter-redis';
import { bytesWaitingFrom, holdLoop } from '@cos/test-support/held-loop';
import { waitFor } from './redis-server.js';


/**
 * REDIS_TIMEOUT_MS of the counters under test: the rule is the same at any bound, and one well above a
 * loaded machine's scheduling delays keeps the calls that are not held from being late by chance.
 */
export const HELD_TIMEOUT_MS = 250;
/** Change bound of the counters under test: a Redis (or slot) seen first is settled after it. */
export const HELD_CHANGE_BOUND_MS = 300;
const LIMIT = 1_000_000;

export interface HeldLoopTarget {
  /** A counter with timeoutMs HELD_TIMEOUT_MS and changeBoundMs HELD_CHANGE_BOUND_MS, connected. */
  readonly counter: RedisRateCounter;
  /** The ports of every Redis node the counter talks to. */
  readonly ports: readonly number[];
  /**
   * Set on one Redis, whose hot connection writes a batch in the check phase that sends it (C-203):
   * a SIGSTOP and SIGCONT of that Redis, so that a call can reach it after its deadline although it
   * was written in time. Unset on a cluster, where node-redis writes in the loop turn after the batch
   * is sent, so a hold between the two makes the call reach Redis late.
   */
  readonly sameTurnWrite?: { freeze(): void; thaw(): void };
}

const nextImmediate = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Holds the loop in the check phase right after the hot connection wrote the next batch (one Redis):
 * the batch goes out in a `setImmediate` scheduled by the first call queued, and is written on the
 * `process.nextTick` after it; an immediate scheduled after the call runs after both.
 */
function holdAfterSameTurnWrite(ports: readonly number[]): Promise<boolean> {
  return nextImmediate().then(() => holdLoop(3 * HELD_TIMEOUT_MS, () => bytesWaitingFrom(ports)));
}

/**
 * Holds the loop in the check phase right after the next Redis command has been written: node-redis
 * writes its queued commands in a `setImmediate` scheduled when the command is sent (traced on the
 * `node-redis:command` channel, whose `end` comes right after), so an immediate scheduled then runs
 * after that write. The hold lasts 3 × the timeout and until the reply waits in the socket.
 */
function holdAfterNextWrite(ports: readonly number[]): Promise<boolean> {
  const commands = tracingChannel('node-redis:command');
  return new Promise<boolean>((resolve) => {
    const handlers = {
      start() {},
      end() {
        commands.unsubscribe(handlers);
        setImmediate(() => resolve(holdLoop(3 * HELD_TIMEOUT_MS, () => bytesWaitingFrom(ports))));
      },
      asyncStart() {},
      asyncEnd() {},
      error() {},
    };
    commands.subscribe(handlers);
  });
}

export function heldLoopSuite(connect: () => Promise<HeldLoopTarget>): void {
  let target: HeldLoopTarget;
  let core: Core;
  let reads = 0;
  const keys: Record<'a' | 'b', string> = { a: '', b: '' };

  before(async () => {
    target = await connect();
    const store = createInMemoryStore();
    const inner = storePorts(store).apiKeys;
    // The real in-memory store, its credential lookups counted.
    const apiKeys: ApiKeyStore = new Proxy(inner, {
      get(object, property) {
        if (property === 'findCredential') {
          return (digest: string) => {
            reads++;
            return object.findCredential(digest);
          };
        }
        const value: unknown = Reflect.get(object, property, object);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(object) : value;
      },
    });
    core = createCore({
      stores: { ...store.stores, apiKeys },
      unitOfWork: store.unitOfWork,
      health: store.health,
      counter: target.counter,
      freshness: target.counter,
      config: { rateCounterTimeoutMs: HELD_TIMEOUT_MS, rateLimitPerMinute: LIMIT },
    });
    for (const name of ['a', 'b'] as const) {
      const org = await core.organisations.create(OPERATOR, { name: `Held ${name}`, slug: `held-${name}-${Date.now()}` });
      keys[name] = (await core.apiKeys.issue(OPERATOR, org.id, { label: name })).rawKey;
    }
  });

  async function admit(name: 'a' | 'b') {
    const answer = await core.admission.admit(`Bearer ${keys[name]}`, '127.0.0.1');
    if (!answer.admitted) throw new Error(`key ${name} refused`);
    return answer.decision;
  }

  /** Both keys served from the cache (a fresh Redis or slot settles after the change bound). */
  async function warm(): Promise<void> {
    await waitFor(
      async () => {
        const before = reads;
        for (const name of ['a', 'b', 'a', 'b'] as const) await admit(name);
        return reads - before <= 2 && (await servedFromCache());
      },
      10_000,
      'both keys to be served from the cache',
    );
  }
  async function servedFromCache(): Promise<boolean> {
    const before = reads;
    for (const name of ['a', 'b'] as const) {
      const decision = await admit(name);
      if (decision.remaining === decision.limit) return false;
    }
    return reads === before;
  }

  it('C-150: a freshness reply that arrived while the event loop was held past REDIS_TIMEOUT_MS is not late: served from the cache and counted, no store read', async () => {
    await warm();
    const before = reads;
    const held = target.sameTurnWrite !== undefined ? null : holdAfterNextWrite(target.ports);
    const answer = admit('a');
    const heldNow = held ?? holdAfterSameTurnWrite(target.ports);
    const decision = await answer;
    expect(await heldNow, 'the reply was waiting in the socket when the hold ended').to.equal(true);
    expect(decision.remaining, 'counted by the call (not failed open)').to.be.lessThan(LIMIT);
    expect(reads - before, 'store reads').to.equal(0);
  });

  it('C-151: a call that reached Redis after its deadline costs its own lookup only: that request reads the store and fails open, the next ones of both organisations are served from the cache', async () => {
    await warm();
    const before = reads;
    const frozen = target.sameTurnWrite;
    frozen?.freeze();
    const pending = admit('a');
    // The batch is sent (the check phase after the call); on a cluster node-redis writes it in the next turn.
    await nextImmediate();
    try {
      // Held past the deadline: before node-redis writes the call (cluster), or with the call written
      // to a frozen Redis (one Redis). Either way it reaches Redis after its deadline and counts nothing.
      holdLoop(3 * HELD_TIMEOUT_MS);
    } finally {
      frozen?.thaw();
    }
    if (frozen !== undefined) expect(holdLoop(0, () => bytesWaitingFrom(target.ports)), "the frozen Redis's answer").to.equal(true);
    const late = await pending;
    expect(late.remaining, 'failed open').to.equal(late.limit);
    expect(reads - before, 'the late request read the store').to.equal(1);
    for (const name of ['a', 'b'] as const) {
      const decision = await admit(name);
      expect(decision.remaining, `key ${name} counted`).to.be.lessThan(LIMIT);
    }
    expect(reads - before, 'no store read after the late call').to.equal(1);
  });
}
