/** Usage buckets: an hour, or a UTC day (epoch ms throughout). */

export type UsageGranularity = 'hour' | 'day';

/** What became of a request of a key that authenticated: answered, or refused with 429. */
export type UsageOutcome = 'answered' | 'rate_limited';

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;

/** The start of the bucket of `granularity` holding `ms` (epoch ms; days are UTC days). */
export function bucketOf(ms: number, granularity: UsageGranularity): number {
  const size = granularity === 'hour' ? HOUR_MS : DAY_MS;
  return ms - (((ms % size) + size) % size);
}
