import type { Clock } from '../ports/clock.js';

/** Default start of a FakeClock: a fixed instant in the middle of a UTC minute. */
export const FAKE_CLOCK_START = '2026-06-10T12:00:30.000Z';

function toDate(t: Date | string): Date {
  const d = typeof t === 'string' ? new Date(t) : new Date(t.getTime());
  if (Number.isNaN(d.getTime())) throw new RangeError(`FakeClock: invalid time ${String(t)}`);
  return d;
}

/** A clock that only moves when told to. `now()` returns a fresh Date each call. */
export class FakeClock implements Clock {
  #ms: number;

  constructor(start: Date | string = FAKE_CLOCK_START) {
    this.#ms = toDate(start).getTime();
  }

  now(): Date {
    return new Date(this.#ms);
  }

  set(t: Date | string): void {
    this.#ms = toDate(t).getTime();
  }

  advance(ms: number): void {
    if (!Number.isFinite(ms)) throw new RangeError(`FakeClock: cannot advance by ${ms}`);
    this.#ms += ms;
  }
}
