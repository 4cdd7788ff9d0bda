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
  /**
   * `n` hits of the counter `key` (an organisation's), of which some come with keys that have their
   * own limit (C-292), as one atomic step: each of `keys` is counted first (INCRBY its `hits`), and
   * of its hits only those that find its window under its `limit` count against `key`; the others
   * (refused by the key's window) do not. Answers `key`'s count after the step (when nothing counted
   * against it, its current count) and each key counter's count after it, in the order given. Every
   * counter named must live in `key`'s hash slot (keyCounterKey). Optional: a counter without it
   * is not given keys with limits of their own (the core then counts them with hit() alone).
   */
  hitGuarded?(key: string, ttlMs: number, n: number, keys: readonly KeyCounter[]): GuardedCount | Promise<GuardedCount>;
}

/** A key's window, counted before its organisation's in the same atomic step (C-292). */
export interface KeyCounter {
  /** The key's counter in the current window (counter-keys.ts keyCounterKey: in its organisation's slot). */
  readonly counterKey: string;
  /** The key's limit per minute. */
  readonly limit: number;
  /** How many of the step's hits are this key's (≥ 1). */
  readonly hits: number;
}

/** The answer of a guarded step: the organisation counter's count, and each key counter's. */
export interface GuardedCount {
  readonly count: number;
  readonly keyCounts: readonly number[];
}
