/**
 * Counts hits per scope and window. Core owns the windows and the fail-open decision; an
 * implementation only counts (the express-rate-limit store idea).
 */
export interface RateCounter {
  /**
   * Increments the counter named `key` and returns the count including this hit. The core names it
   * (counter-keys.ts: one key per scope and window, `{<scope>}:<windowStartMs>`); an implementation
   * uses the name as given, behind its own namespace at most. The counter may be forgotten `ttlMs`
   * after the first hit.
   * A counter that can answer at once (in-process) returns the number itself; one that waits on a
   * backing store returns a promise, which rejects when that store fails (it may also throw). Only
   * a promise is raced against config.rateCounterTimeoutMs; callers `await` either.
   *
   * `n` (a whole number ≥ 1, default 1) counts that many hits at once, as one atomic increment: the
   * answer is the count including all of them (the core hands the hits the counts answer−n+1…answer).
   */
  hit(key: string, ttlMs: number, n?: number): number | Promise<number>;
}
