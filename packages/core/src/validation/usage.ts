/**
 * The usage routes' query: `granularity` (hour or day, default hour), `since` and `until` (ISO 8601
 * instants with a zone). `until` defaults to now; `since` to one day before `until` (hour) or 30
 * days before it (day). `since` is taken back to the start of its bucket (its hour, or its UTC day)
 * and `until` is exclusive: the buckets are the hours starting in [since, until), summed per bucket.
 * The range may span at most 31 days by hour and 366 days by day, so an answer has at most 744
 * buckets and needs no paging. Unknown parameters are ignored, as on every list.
 */
import { bucketOf, DAY_MS, type UsageGranularity } from '../domain/usage.js';
import type { ErrorDetail } from '../domain/errors.js';
import type { UsageRange } from '../ports/usage-store.js';
import { invalid, isJsonObject, valid, type Checked } from './issues.js';
import { instant, ISSUE_QUERY, ISSUE_TIMESTAMP, ISSUE_UNTIL } from './query.js';

/** How far back `since` goes when it is not given. */
export const DEFAULT_USAGE_SPAN_MS: Readonly<Record<UsageGranularity, number>> = { hour: DAY_MS, day: 30 * DAY_MS };
/** The longest range (until - since) of one query. */
export const MAX_USAGE_SPAN_DAYS: Readonly<Record<UsageGranularity, number>> = { hour: 31, day: 366 };
const ISSUE_GRANULARITY = 'must be one of hour, day';
const ISSUE_SINCE_FUTURE = 'must be in the past when until is not given';
const usageSpanIssue = (granularity: UsageGranularity): string =>
  `must be at most ${MAX_USAGE_SPAN_DAYS[granularity]} days before until with granularity ${granularity}`;

export function checkUsageQuery(query: unknown, now: Date): Checked<UsageRange> {
  if (query !== undefined && query !== null && !isJsonObject(query)) return invalid([{ field: 'query', issue: ISSUE_QUERY }]);
  const q: Record<string, unknown> = query ?? {};
  const details: ErrorDetail[] = [];
  let granularity: UsageGranularity = 'hour';
  const g = q['granularity'];
  if (g !== undefined) {
    if (g === 'hour' || g === 'day') granularity = g;
    else details.push({ field: 'granularity', issue: ISSUE_GRANULARITY });
  }
  const bound = (field: 'since' | 'until'): Date | undefined | null => {
    const raw = q[field];
    if (raw === undefined) return undefined;
    const at = instant(raw);
    if (at === null) details.push({ field, issue: ISSUE_TIMESTAMP });
    return at;
  };
  const givenSince = bound('since');
  const givenUntil = bound('until');
  if (details.length > 0) return invalid(details);
  const until = givenUntil ?? now;
  const since = givenSince ?? new Date(until.getTime() - DEFAULT_USAGE_SPAN_MS[granularity]);
  if (until.getTime() <= since.getTime()) {
    return invalid([givenUntil === undefined ? { field: 'since', issue: ISSUE_SINCE_FUTURE } : { field: 'until', issue: ISSUE_UNTIL }]);
  }
  if (until.getTime() - since.getTime() > MAX_USAGE_SPAN_DAYS[granularity] * DAY_MS) {
    return invalid([{ field: 'since', issue: usageSpanIssue(granularity) }]);
  }
  return valid({ since: new Date(bucketOf(since.getTime(), granularity)), until, granularity });
}
