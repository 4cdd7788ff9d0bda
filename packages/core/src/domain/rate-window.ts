/**
 * Fixed UTC calendar-minute windows (spec §8, C-50..C-54). Pure functions: no clock inside.
 */
export const WINDOW_MS = 60_000;

export interface RateWindow {
  /** Epoch milliseconds of second :00 of the current UTC minute. */
  readonly startMs: number;
  /** Epoch milliseconds at which the window ends (start of the next minute). */
  readonly endMs: number;
}

/** What the limiter decided for one request, enough to write every rate-limit header. */
export interface RateDecision {
  readonly allowed: boolean;
  /** X-RateLimit-Limit */
  readonly limit: number;
  /** X-RateLimit-Remaining, never negative. */
  readonly remaining: number;
  /** X-RateLimit-Reset: epoch seconds at which the current window ends. */
  readonly resetEpochSeconds: number;
  /** Retry-After / retry_after: whole seconds until the next window starts, 1..60. */
  readonly retryAfterSeconds: number;
  /** True when the counter store failed and the request was let through unchecked (C-54). */
  readonly degraded: boolean;
  /**
   * On a refusal of a request counted in two windows (its key has a limit of its own): the one that
   * refused it (C-293), its organisation's or its key's. Absent otherwise.
   */
  readonly limitScope?: 'organisation' | 'key';
}

export function windowAt(nowMs: number): RateWindow {
  const startMs = Math.floor(nowMs / WINDOW_MS) * WINDOW_MS;
  return { startMs, endMs: startMs + WINDOW_MS };
}

/** Whole seconds from `nowMs` until the window ends, clamped to 1..60. */
export function retryAfterSeconds(window: RateWindow, nowMs: number): number {
  const s = Math.ceil((window.endMs - nowMs) / 1000);
  return Math.min(60, Math.max(1, s));
}

/**
 * The decision for the `count`-th request of a window (count includes this request).
 * Request `limit + 1` and every later one in the window is refused (C-51).
 */
export function decide(count: number, limit: number, window: RateWindow, nowMs: number): RateDecision {
  return {
    allowed: count <= limit,
    limit,
    remaining: Math.max(0, limit - count),
    resetEpochSeconds: Math.floor(window.endMs / 1000),
    retryAfterSeconds: retryAfterSeconds(window, nowMs),
    degraded: false,
  };
}

/** The fail-open decision (C-54): allowed, Remaining shows the full limit. */
export function failOpen(limit: number, window: RateWindow, nowMs: number): RateDecision {
  return { ...decide(0, limit, window, nowMs), allowed: true, remaining: limit, degraded: true };
}

/** Of `hits` requests that brought a key counter to `total`, how many found its window under `limit` (C-292). */
export function keyAdmitted(total: number, hits: number, limit: number): number {
  const admitted = limit - (total - hits);
  return admitted < 0 ? 0 : admitted > hits ? hits : admitted;
}
