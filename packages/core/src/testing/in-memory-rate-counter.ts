import { systemClock } from '../defaults.js';
import type { Clock } from '../ports/clock.js';
import type { RateCounter } from '../ports/rate-counter.js';

interface Slot {
  count: number;
  expiresAtMs: number;
}

/**
 * The in-process RateCounter (C-55 without REDIS_URL; also the tests' counter). A window is
 * forgotten `ttlMs` after its first hit, measured on the given clock (default: the system clock).
 */
export class InMemoryRateCounter implements RateCounter {
  readonly #clock: Clock;
  readonly #slots = new Map<string, Slot>();
  #nextSweepMs = 0;

  constructor(clock: Clock = systemClock) {
    this.#clock = clock;
  }

  async hit(scope: string, windowStartMs: number, ttlMs: number): Promise<number> {
    const now = this.#clock.now().getTime();
    this.#sweep(now);
    const key = `${windowStartMs}\u0000${scope}`;
    const slot = this.#slots.get(key);
    if (slot !== undefined && slot.expiresAtMs > now) {
      slot.count += 1;
      return slot.count;
    }
    this.#slots.set(key, { count: 1, expiresAtMs: now + Math.max(0, ttlMs) });
    return 1;
  }

  /** Drops expired windows at most once per second of clock time, so memory stays bounded. */
  #sweep(now: number): void {
    if (now < this.#nextSweepMs) return;
    this.#nextSweepMs = now + 1000;
    for (const [key, slot] of this.#slots) if (slot.expiresAtMs <= now) this.#slots.delete(key);
  }
}
