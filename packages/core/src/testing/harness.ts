import type { HealthProbe } from '../ports/health-probe.js';
import type { RateCounter } from '../ports/rate-counter.js';
import type { OuterStores, UnitOfWork } from '../ports/unit-of-work.js';

/** One store implementation under test (or in use): its stores, unit of work and health probe. */
export interface StoreHarness {
  /**
   * The stores outside a unit of work, typed as hosts get them (without the credential-affecting
   * writes); the contract suites reach those writes through contracts/fixtures.ts's storePorts.
   */
  readonly stores: OuterStores;
  readonly unitOfWork: UnitOfWork;
  readonly health: HealthProbe;
  close(): Promise<void>;
}

/** Each call returns a fresh, EMPTY store (an implementation may truncate instead of re-creating). */
export type StoreHarnessFactory = () => Promise<StoreHarness>;

/** One rate counter under test. */
export interface CounterHarness {
  readonly counter: RateCounter;
  close(): Promise<void>;
}
