/** In memory: usage counts per key and hour (UsageStore). */
import { bucketOf } from '../../domain/usage.js';
import type { UsageBucket, UsageCount, UsageRange, UsageStore } from '../../ports/usage-store.js';
import type { UsageRow } from '../in-memory-tables.js';
import type { Session } from '../in-memory-session.js';

const rowId = (keyId: string, hourMs: number): string => `${keyId} ${hourMs}`;

function buckets(rows: Iterable<UsageRow>, range: UsageRange): UsageBucket[] {
  const since = range.since.getTime();
  const until = range.until.getTime();
  const sums = new Map<number, { requests: number; rateLimited: number }>();
  for (const r of rows) {
    if (r.hourMs < since || r.hourMs >= until) continue;
    const start = bucketOf(r.hourMs, range.granularity);
    const sum = sums.get(start) ?? { requests: 0, rateLimited: 0 };
    sums.set(start, { requests: sum.requests + r.requests, rateLimited: sum.rateLimited + r.rateLimited });
  }
  return [...sums]
    .filter(([, s]) => s.requests > 0 || s.rateLimited > 0)
    .sort(([a], [b]) => a - b)
    .map(([start, s]) => ({ start: new Date(start), requests: s.requests, rateLimited: s.rateLimited }));
}

export class InMemoryUsageStore implements UsageStore {
  constructor(private readonly session: Session) {}

  async add(counts: readonly UsageCount[]): Promise<void> {
    this.session.write((t) => {
      for (const c of counts) {
        const key = t.apiKeys.get(c.keyId);
        if (key === undefined) continue;
        const hourMs = c.hourStart.getTime();
        const id = rowId(c.keyId, hourMs);
        const row = t.usage.get(id);
        t.usage.set(id, {
          keyId: c.keyId,
          organisationId: key.organisationId,
          hourMs,
          requests: (row?.requests ?? 0) + c.requests,
          rateLimited: (row?.rateLimited ?? 0) + c.rateLimited,
        });
      }
    });
  }

  async forKey(organisationId: string, keyId: string, range: UsageRange): Promise<UsageBucket[]> {
    return this.session.read((t) => buckets([...t.usage.values()].filter((r) => r.keyId === keyId && r.organisationId === organisationId), range));
  }

  async forOrganisation(organisationId: string, range: UsageRange): Promise<UsageBucket[]> {
    return this.session.read((t) => buckets([...t.usage.values()].filter((r) => r.organisationId === organisationId), range));
  }

  async purge(before: Date): Promise<number> {
    const limit = before.getTime();
    return this.session.write((t) => {
      let n = 0;
      for (const [id, row] of t.usage) {
        if (row.hourMs < limit) {
          t.usage.delete(id);
          n += 1;
        }
      }
      return n;
    });
  }
}
