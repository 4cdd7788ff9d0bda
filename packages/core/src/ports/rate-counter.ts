/**
 * Counts hits per scope and window. Core owns the windows and the fail-open decision; an
 * implementation only counts (the express-rate-limit store idea).
 */
export interface RateCounter {
  /**
   * Increments the counter of `scope` for the window starting at `windowStartMs` and returns the
   * count including this hit. The counter may be forgotten `ttlMs` after the first hit.
   * Rejects when the backing store fails.
   */
  hit(scope: string, windowStartMs: number, ttlMs: number): Promise<number>;
}
