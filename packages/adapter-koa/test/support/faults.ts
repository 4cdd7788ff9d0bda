/**
 * Fault injection around real adapters (not mocks): a store harness whose every call fails while a
 * fault is switched on, and rate counters that fail or never answer. They let the tests drive the
 * C-17 (store down), C-4 (probe fails) and C-54 (counter down) paths over real HTTP.
 */
import type { RateCounter } from '@cos/core';
import type { StoreHarness } from '@cos/core/testing';

export type Fault = () => unknown;

export interface FaultyStore extends StoreHarness {
  /** While set, every store call, unit of work and health probe rejects with `fault()`. */
  failWith(fault: Fault | null): void;
}

function guard<T extends object>(target: T, current: () => Fault | null): T {
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const value = Reflect.get(obj, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const fault = current();
        if (fault !== null) return Promise.reject(fault());
        return (value as (...a: unknown[]) => unknown).apply(obj, args);
      };
    },
  });
}

export function faultyStore(inner: StoreHarness): FaultyStore {
  let fault: Fault | null = null;
  const current = (): Fault | null => fault;
  const wrapStores = (s: StoreHarness['stores']): StoreHarness['stores'] => ({
    organisations: guard(s.organisations, current),
    members: guard(s.members, current),
    apiKeys: guard(s.apiKeys, current),
    audit: guard(s.audit, current),
  });
  return {
    stores: wrapStores(inner.stores),
    unitOfWork: {
      run: (work) => (fault !== null ? Promise.reject(fault()) : inner.unitOfWork.run((stores) => work(wrapStores(stores)))),
    },
    health: guard(inner.health, current),
    close: () => inner.close(),
    failWith(f) {
      fault = f;
    },
  };
}

/** A counter whose backing store is down: every hit rejects. */
export class DeadCounter implements RateCounter {
  calls = 0;
  hit(): Promise<number> {
    this.calls++;
    return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
  }
}

/** A counter that never answers (a frozen Redis). */
export class FrozenCounter implements RateCounter {
  calls = 0;
  hit(): Promise<number> {
    this.calls++;
    return new Promise<number>(() => undefined);
  }
}
