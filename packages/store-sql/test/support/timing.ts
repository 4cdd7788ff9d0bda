/** Timing helpers of the deadline tests (C-17): how a call ended and when, and a held connection. */
import type { SqlStore } from '@cos/store-sql';

export interface Outcome {
  readonly error: unknown;
  readonly elapsedMs: number;
}

/** Runs `call` and says how it ended (its error, or null) and after how many ms; never throws. */
export async function outcomeOf(call: () => Promise<unknown>): Promise<Outcome> {
  const started = performance.now();
  try {
    await call();
    return { error: null, elapsedMs: performance.now() - started };
  } catch (error) {
    return { error, elapsedMs: performance.now() - started };
  }
}

/**
 * Starts `SELECT pg_sleep(seconds)` on the store's own connections and resolves once the store has
 * announced it (onStatement: its connection is checked out, right before sending), so that the next
 * call has to wait for a connection. `released` settles when the sleep ends. (It is wrapped in an
 * object: an async function returning the statement's promise itself would adopt it, and resolve
 * only once the connection is free again.)
 */
export async function holdTheConnection(store: SqlStore, seconds: number): Promise<{ readonly released: Promise<unknown> }> {
  let holding = false;
  const stop = store.onStatement((s) => void (holding ||= /pg_sleep/.test(s.sql)));
  const released = store.query(`SELECT pg_sleep(${seconds})`);
  while (!holding) await new Promise((resolve) => setTimeout(resolve, 2));
  stop();
  return { released };
}
