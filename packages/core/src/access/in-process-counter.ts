/**
 * The production in-process RateCounter (C-55): counters live in this process's memory, so it
 * serves exactly one embedded instance (no REDIS_URL). It never fails, so it never fails open.
 * Each counter (one per scope and window, named by the core) is forgotten `ttlMs` after its first hit; expired counters are
 * swept at most once per second, so memory stays bounded by the scopes active within one ttl.
 */
import type { Clock } from '../ports/clock.js';
import type { GuardedCount, KeyCounter, RateCounter } from '../ports/rate-counter.js';
import { keyAdmitted } from '../domain/rate-window.js';
import { systemClock } from '../defaults.js';

interface Slot {
  count: number;
  expiresAtMs: number;
}

const SWEEP_INTERVAL_MS = 1000;

export class InProcessRateCounter implements RateCounter {
  private readonly slots = new Map<string, Slot>();
  private nextSweepMs = 0;

  constructor(private readonly clock: Clock = systemClock) {}

  /** Answers synchronously: the core then needs no timer and no promise for it. */
  hit(key: string, ttlMs: number, n = 1): number {
    const nowMs = this.clock.now().getTime();
    if (nowMs >= this.nextSweepMs) this.sweep(nowMs);
    let slot = this.slots.get(key);
    if (slot === undefined || slot.expiresAtMs <= nowMs) {
      slot = { count: 0, expiresAtMs: nowMs + ttlMs };
      this.slots.set(key, slot);
    }
    slot.count += n;
    return slot.count;
  }

  /** RateCounter.hitGuarded, synchronously: every key counter first, then the organisation's by the hits they admitted. */
  hitGuarded(key: string, ttlMs: number, n: number, keys: readonly KeyCounter[]): GuardedCount {
    let admitted = n;
    const keyCounts: number[] = [];
    for (const k of keys) {
      const total = this.hit(k.counterKey, ttlMs, k.hits);
      keyCounts.push(total);
      admitted -= k.hits - keyAdmitted(total, k.hits, k.limit);
    }
    return { count: admitted > 0 ? this.hit(key, ttlMs, admitted) : this.current(key), keyCounts };
  }

  /** The live count of `key` (0 when none), counting nothing. */
  private current(key: string): number {
    const slot = this.slots.get(key);
    return slot === undefined || slot.expiresAtMs <= this.clock.now().getTime() ? 0 : slot.count;
  }

  /** Number of live counters (for tests and diagnostics). */
  get size(): number {
    return this.slots.size;
  }

  private sweep(nowMs: number): void {
    for (const [key, slot] of this.slots) {
      if (slot.expiresAtMs <= nowMs) this.slots.delete(key);
    }
    this.nextSweepMs = nowMs + SWEEP_INTERVAL_MS;
  }
}
