/**
 * The failover scenario of C-64, shared by the plain (primary + replica) and the cluster tests: two
 * instances (two cores over one store, each with its own Redis counter as counter and credential
 * freshness) cache a key; the replica stops (SIGSTOP); the key is revoked on one instance; the
 * primary is killed; the replica resumes and is promoted; the instances reach it. The revocation
 * must have answered either its success, and then the key is never admitted again on either
 * instance, or 503, and then nothing was revoked (the client retries and the retry holds).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { OPERATOR, UnauthorizedError, UnavailableError, createCore, type Core } from '@cos/core';
import { createInMemoryStore } from '@cos/core/testing';
import type { RedisRateCounter } from '@cos/limiter-redis';
import { redisTopologyAvailable } from '@cos/test-support/redis-cluster';

/** A suite that starts Redis topologies: skipped (visibly) without redis-server and redis-cli, except under CI=true. */
export function describeWithTopology(title: string, body: (this: Mocha.Suite) => void): void {
  if (redisTopologyAvailable()) {
    describe(title, body);
    return;
  }
  describe(title, () => {
    if (process.env.CI === 'true') {
      it('needs redis-server and redis-cli (CI=true: this must not be skipped)', () => {
        throw new Error('redis-server or redis-cli not found');
      });
    } else {
      it('needs redis-server and redis-cli on PATH (skipped outside CI)');
    }
  });
}

export interface FailoverTopology {
  /** A counter of one instance (not connected through anything the test cuts by itself). */
  counter(): RedisRateCounter;
  /** Before the revocation: the replica of the organisation's primary stops. */
  stopReplica(organisationId: string): Promise<void>;
  /**
   * After it: the primary dies, the replica resumes and is promoted, the instances are pointed at
   * it. Resolves once the instances' counters noticed the primary's death (no call is made meanwhile).
   */
  failover(organisationId: string, counters: readonly RedisRateCounter[]): Promise<void>;
}

export interface FailoverOutcome {
  /** What the revocation answered: 204 (committed) or 503 (refused, nothing written). */
  readonly answered: 204 | 503;
  /** Whether the store holds the key revoked right after the answer. */
  readonly revokedInStore: boolean;
  /** Admissions of the key answered 200 although a revocation of it had answered 204 before. */
  readonly stale: string[];
  /** Admissions made after the failover (both instances). */
  readonly checked: number;
}

const CHANGE_BOUND_MS = 1_000;

export async function revokeAcrossFailover(topology: FailoverTopology): Promise<FailoverOutcome> {
  const store = createInMemoryStore();
  const counters = [topology.counter(), topology.counter()];
  const cores: Core[] = counters.map((counter) =>
    // A generous bound on Redis calls: this is about failover, not latency on a loaded machine.
    createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter, freshness: counter, config: { rateCounterTimeoutMs: 1_000 } }),
  );
  const [one, two] = cores as [Core, Core];
  try {
    const deadline = Date.now() + 10_000;
    while (!counters.every((c) => c.isReady) || !(await Promise.all(counters.map((c) => c.whenReady(100)))).every(Boolean)) {
      if (Date.now() > deadline) throw new Error('the instances never connected');
      await sleep(20);
    }
    const org = await one.organisations.create(OPERATOR, { name: 'Failover Ltd', slug: `failover-${Date.now()}` });
    const issued = await one.apiKeys.issue(OPERATOR, org.id, { label: 'failover' });
    const authorization = `Bearer ${issued.rawKey}`;
    const admit = async (core: Core): Promise<200 | 401 | 'error'> => {
      try {
        return (await core.admission.admit(authorization, '127.0.0.1')).admitted ? 200 : 401;
      } catch (e) {
        return e instanceof UnauthorizedError ? 401 : 'error';
      }
    };
    // The organisation's slot is new to this Redis: not settled for the change bound. Then both
    // instances fill their caches with the key.
    for (const core of cores) await admit(core);
    await sleep(CHANGE_BOUND_MS + 200);
    for (let i = 0; i < 3; i++) for (const core of cores) if ((await admit(core)) !== 200) throw new Error('the key was not admitted before the revocation');

    await topology.stopReplica(org.id);
    let answered: 204 | 503;
    try {
      await one.apiKeys.revoke(OPERATOR, org.id, issued.key.id);
      answered = 204;
    } catch (e) {
      if (!(e instanceof UnavailableError)) throw e;
      answered = 503;
    }
    const revokedInStore = (await store.stores.apiKeys.findById(org.id, issued.key.id))?.revokedAt != null;
    await topology.failover(org.id, counters);
    // No request while the instances reconnect (a failed call would empty their caches and hide a
    // resurrected token): wait for their connections, then ask.
    const ready = Date.now() + 15_000;
    while (!(await Promise.all(counters.map((c) => c.whenReady(200)))).every(Boolean)) {
      if (Date.now() > ready) throw new Error('the instances never reached the promoted replica');
    }
    await sleep(300);
    const stale: string[] = [];
    let checked = 0;
    let revoked = answered === 204;
    const until = Date.now() + 2 * CHANGE_BOUND_MS + 500;
    for (let round = 0; Date.now() < until; round++) {
      if (!revoked) {
        // The client retries the refused revocation against the promoted replica.
        try {
          await two.apiKeys.revoke(OPERATOR, org.id, issued.key.id);
          revoked = true;
        } catch (e) {
          if (!(e instanceof UnavailableError)) throw e;
        }
      }
      for (const [i, core] of cores.entries()) {
        const status = await admit(core);
        checked++;
        if (revoked && status === 200) stale.push(`round ${round}: instance ${i + 1} answered 200`);
      }
      await sleep(50);
    }
    if (!revoked) throw new Error('the revocation never succeeded after the failover');
    return { answered, revokedInStore, stale, checked };
  } finally {
    await Promise.all(counters.map((c) => c.close()));
  }
}

export const FAILOVER_CHANGE_BOUND_MS = CHANGE_BOUND_MS;
