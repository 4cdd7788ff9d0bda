import { DAY_MS, HOUR_MS, type UsageBucket, type UsageCount, type UsageRange, type UsageStore } from '@cos/core';
import { execute, query, type StoreContext } from '../context.js';

/**
 * One statement for the whole batch: the batch is one JSON parameter of [key_id, hour_start,
 * requests, rate_limited] rows (no bound-parameter limit), summed per (key, hour) first (Postgres
 * refuses to update one row twice in a statement), joined to api_keys for the organisation (an
 * unknown key id joins nothing), and added to what is stored. SQLite needs the `WHERE true` to parse
 * an upsert whose SELECT has a join.
 */
const ADD: Readonly<Record<StoreContext['dialect'], string>> = {
  postgres: `INSERT INTO key_usage (key_id, hour_start, organisation_id, requests, rate_limited)
  SELECT k.id, u.hour_start, k.organisation_id, u.requests, u.rate_limited
  FROM (SELECT e ->> 0 AS key_id, (e ->> 1)::bigint AS hour_start, sum((e ->> 2)::bigint)::bigint AS requests, sum((e ->> 3)::bigint)::bigint AS rate_limited
        FROM json_array_elements(?::json) AS e GROUP BY 1, 2) AS u
  JOIN api_keys AS k ON k.id = u.key_id
  ON CONFLICT (key_id, hour_start) DO UPDATE SET
    requests = key_usage.requests + excluded.requests, rate_limited = key_usage.rate_limited + excluded.rate_limited`,
  sqlite: `INSERT INTO key_usage (key_id, hour_start, organisation_id, requests, rate_limited)
  SELECT k.id, u.hour_start, k.organisation_id, u.requests, u.rate_limited
  FROM (SELECT value ->> 0 AS key_id, value ->> 1 AS hour_start, sum(value ->> 2) AS requests, sum(value ->> 3) AS rate_limited
        FROM json_each(?) GROUP BY 1, 2) AS u
  JOIN api_keys AS k ON k.id = u.key_id
  WHERE true
  ON CONFLICT (key_id, hour_start) DO UPDATE SET
    requests = key_usage.requests + excluded.requests, rate_limited = key_usage.rate_limited + excluded.rate_limited`,
};

/** Buckets by integer arithmetic on the epoch ms (hours and UTC days alike), the same on both dialects. */
const SERIES = (where: string): string => `SELECT hour_start - (hour_start % ?) AS start, sum(requests) AS requests, sum(rate_limited) AS rate_limited
  FROM key_usage WHERE ${where} AND hour_start >= ? AND hour_start < ?
  GROUP BY 1 HAVING sum(requests) + sum(rate_limited) > 0 ORDER BY 1`;
const FOR_KEY = SERIES('organisation_id = ? AND key_id = ?');
const FOR_ORGANISATION = SERIES('organisation_id = ?');
const PURGE = 'DELETE FROM key_usage WHERE hour_start < ?';

interface BucketRow {
  readonly start: unknown;
  readonly requests: unknown;
  readonly rate_limited: unknown;
}

function bucketFromRow(row: BucketRow): UsageBucket {
  return { start: new Date(Number(row.start)), requests: Number(row.requests), rateLimited: Number(row.rate_limited) };
}

const sizeOf = (range: UsageRange): number => (range.granularity === 'hour' ? HOUR_MS : DAY_MS);

/** Usage counts per key and hour (table key_usage). */
export class SqlUsageStore implements UsageStore {
  constructor(private readonly ctx: StoreContext) {}

  async add(counts: readonly UsageCount[]): Promise<void> {
    if (counts.length === 0) return;
    const batch = JSON.stringify(counts.map((c) => [c.keyId, c.hourStart.getTime(), c.requests, c.rateLimited]));
    await execute(this.ctx, ADD[this.ctx.dialect], [batch]);
  }

  async forKey(organisationId: string, keyId: string, range: UsageRange): Promise<UsageBucket[]> {
    const rows = await query<BucketRow>(this.ctx, FOR_KEY, [sizeOf(range), organisationId, keyId, range.since.getTime(), range.until.getTime()]);
    return rows.map(bucketFromRow);
  }

  async forOrganisation(organisationId: string, range: UsageRange): Promise<UsageBucket[]> {
    const rows = await query<BucketRow>(this.ctx, FOR_ORGANISATION, [sizeOf(range), organisationId, range.since.getTime(), range.until.getTime()]);
    return rows.map(bucketFromRow);
  }

  async purge(before: Date): Promise<number> {
    return execute(this.ctx, PURGE, [before.getTime()]);
  }
}
