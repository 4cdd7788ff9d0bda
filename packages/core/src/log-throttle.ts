/**
 * "At most once per interval" for a log line that an outage would otherwise repeat on every
 * request, tick or retry (C-54's rule for log lines). One window per key (a message, a kind of
 * driver line); the keys are a fixed, small set of the caller's own strings.
 *
 * Time comes from the caller, in milliseconds: in core the Clock port
 * (`() => clock.now().getTime()`), so a fake clock drives the windows in tests.
 */
export class LogThrottle {
  readonly #intervalMs: number;
  readonly #nowMs: () => number;
  readonly #lastPassed = new Map<string, number>();
  readonly #heldBack = new Map<string, number>();

  constructor(intervalMs: number, nowMs: () => number) {
    this.#intervalMs = intervalMs;
    this.#nowMs = nowMs;
  }

  /**
   * Lets a line for `key` through when none was let through within the interval: returns how many
   * were held back since the last one that passed (0 or more), and the window starts again. Within
   * the interval: null, and one more held back. `now` is for a caller that has already read the
   * clock for the same event (ms); by default the throttle reads its own.
   */
  pass(key = '', now: number = this.#nowMs()): number | null {
    if (now - (this.#lastPassed.get(key) ?? Number.NEGATIVE_INFINITY) < this.#intervalMs) {
      this.#heldBack.set(key, (this.#heldBack.get(key) ?? 0) + 1);
      return null;
    }
    this.#lastPassed.set(key, now);
    const heldBack = this.#heldBack.get(key) ?? 0;
    this.#heldBack.delete(key);
    return heldBack;
  }
}
