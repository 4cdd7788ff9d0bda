/**
 * The production in-process RateCounter (C-55): counters live in this process's memory, so it
 * serves exactly one embedded instance (no REDIS_URL). It never fails, so it never fails open.
 * Each counter (one per scope and window, named by the core) is forgotten `ttlMs` after its first hit; expired counters are
 * swept at most once per second, so memory stays bounded by the scopes active within one ttl.
 */
import type { Clock } from '../ports/clock.js';
import type { RateCounter } from '../ports/rate-counter.js';
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
