/**
 * Counts hits per scope and window. Core owns the windows and the fail-open decision; an
 * implementation only counts (the express-rate-limit store idea).
 */
export interface RateCounter {
  /**
   * Increments the counter of `scope` for the window starting at `windowStartMs` and returns the
   * count including this hit. The counter may be forgotten `ttlMs` after the first hit.
   * A counter that can answer at once (in-process) returns the number itself; one that waits on a
   * backing store returns a promise, which rejects when that store fails (it may also throw). Only
   * a promise is raced against config.rateCounterTimeoutMs; callers `await` either.
   */
  hit(scope: string, windowStartMs: number, ttlMs: number): number | Promise<number>;
}
