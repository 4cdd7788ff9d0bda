/**
 * Fault injection around real adapters (not mocks): a store harness whose every call fails while a
 * fault is switched on, and rate counters that fail or never answer. They let the tests drive the
 * C-17 (store down), C-4 (probe fails) and C-54 (counter down) paths over real HTTP.
 */
import type { OuterStores, RateCounter } from '@cos/core';
import type { StoreHarness } from '@cos/core/testing';

export type Fault = () => unknown;

export interface FaultyStore extends StoreHarness {
  /**
   * While set, every store call, unit of work and health probe rejects with `fault()`; with
   * `only`, just the calls named there (e.g. "organisations.findById", "unitOfWork.run", "health.ping").
   */
  failWith(fault: Fault | null, only?: readonly string[]): void;
}

function guard<T extends object>(name: string, target: T, current: (call: string) => Fault | null): T {
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const value = Reflect.get(obj, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const fault = current(`${name}.${String(prop)}`);
        if (fault !== null) return Promise.reject(fault());
        return (value as (...a: unknown[]) => unknown).apply(obj, args);
      };
    },
  });
}

export function faultyStore(inner: StoreHarness): FaultyStore {
  let fault: Fault | null = null;
  let only: readonly string[] | undefined;
  const current = (call: string): Fault | null => (only === undefined || only.includes(call) ? fault : null);
  // Each store behind its guard, every method kept: the stores of changeCredentials stay whole.
  const wrapStores = <S extends OuterStores>(s: S): S => ({
    organisations: guard('organisations', s.organisations, current),
    members: guard('members', s.members, current),
    apiKeys: guard('apiKeys', s.apiKeys, current),
    audit: guard('audit', s.audit, current),
    webhooks: guard('webhooks', s.webhooks, current),
    outbox: guard('outbox', s.outbox, current),
    idempotency: guard('idempotency', s.idempotency, current),
    usage: guard('usage', s.usage, current),
  }) as S;
  return {
    stores: wrapStores(inner.stores),
    unitOfWork: {
      run: (work) => {
        const f = current('unitOfWork.run');
        return f !== null ? Promise.reject(f()) : inner.unitOfWork.run((stores) => work(wrapStores(stores)));
      },
      changeCredentials: (organisationIds, work) => {
        const f = current('unitOfWork.run');
        return f !== null ? Promise.reject(f()) : inner.unitOfWork.changeCredentials(organisationIds, (stores) => work(wrapStores(stores)));
      },
    },
    health: guard('health', inner.health, current),
    close: () => inner.close(),
    failWith(f, calls) {
      fault = f;
      only = calls;
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
