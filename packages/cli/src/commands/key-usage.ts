/**
 * `cos-admin key usage ORG KEY`: a key's usage counts (requests answered, requests refused with
 * 429) per hour or UTC day, as GET …/api-keys/{key_id}/usage answers them. The text form is a small
 * table with a bar per bucket, so the shape of the traffic shows at a glance.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { DEFAULT_USAGE_SPAN_MS, MAX_USAGE_SPAN_DAYS, OPERATOR, usageView, type UsageBucket, type UsageGranularity } from '@cos/core';
import { emit, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { DURATION_GRAMMAR, parseDuration, parseTimestamp, TIMESTAMP_GRAMMAR, uuid } from '../values.js';
import { inOrganisation, jsonWanted, plural, withJson } from './shared.js';

/** `--since`: a duration back from now (`7d`) or a timestamp. */
type Since = { readonly agoMs: number } | { readonly at: Date };

function since(text: string): Since {
  const value = text.trim();
  if (/^\d{4}-/.test(value)) return { at: parseTimestamp(value) };
  try {
    return { agoMs: parseDuration(value) };
  } catch {
    throw new InvalidArgumentError(`Use ${DURATION_GRAMMAR} back from now, e.g. 7d, or ${TIMESTAMP_GRAMMAR}.`);
  }
}

function granularity(text: string): UsageGranularity {
  const value = text.trim();
  if (value !== 'hour' && value !== 'day') throw new InvalidArgumentError('Use hour or day.');
  return value;
}

/** Widest bar, in characters: the bucket with the most requests. */
const BAR_WIDTH = 40;
const ANSWERED = '█';
const REFUSED = '░';

/** A bucket's bar: answered then refused, scaled to the largest bucket; any traffic shows as at least one character. */
function bar(b: UsageBucket, largest: number): string {
  const total = b.requests + b.rateLimited;
  const width = Math.max(1, Math.round((total / largest) * BAR_WIDTH));
  const refused = b.rateLimited === 0 ? 0 : Math.min(width, Math.max(1, Math.round((b.rateLimited / total) * width)));
  return ANSWERED.repeat(width - refused) + REFUSED.repeat(refused);
}

/** `2026-06-10 14:00` by hour, `2026-06-10` by day (UTC). */
const startText = (start: Date, g: UsageGranularity): string => (g === 'day' ? start.toISOString().slice(0, 10) : start.toISOString().slice(0, 16).replace('T', ' '));

function usageText(buckets: readonly UsageBucket[], g: UsageGranularity): string {
  if (buckets.length === 0) return 'No requests in this range.';
  const largest = Math.max(...buckets.map((b) => b.requests + b.rateLimited));
  const width = (n: (b: UsageBucket) => number, header: string): number => Math.max(header.length, ...buckets.map((b) => String(n(b)).length));
  const rw = width((b) => b.requests, 'REQUESTS');
  const lw = width((b) => b.rateLimited, 'RATE LIMITED');
  const rows = buckets.map((b) => [startText(b.start, g), String(b.requests).padStart(rw), String(b.rateLimited).padStart(lw), bar(b, largest)]);
  const requests = buckets.reduce((s, b) => s + b.requests, 0);
  const limited = buckets.reduce((s, b) => s + b.rateLimited, 0);
  return [
    table([g === 'day' ? 'DAY (UTC)' : 'HOUR (UTC)', 'REQUESTS'.padStart(rw), 'RATE LIMITED'.padStart(lw), ''], rows, ''),
    `(${plural(buckets.length, g)} with traffic: ${plural(requests, 'request')} answered, ${limited} rate limited; ${ANSWERED} answered, ${REFUSED} rate limited)`,
  ].join('\n');
}

export function registerKeyUsage(key: Command): void {
  withJson(
    key
      .command('usage')
      .description(
        `a key's requests answered and refused with 429, per hour or UTC day, from --since until now; the buckets with traffic only, oldest first. Counts reach the database with the last-use writes (within KEY_USAGE_FLUSH_MS) and are kept for USAGE_RETENTION`,
      )
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .argument('<key_id>', 'key id (UUID)', uuid)
      .option(
        '--since <when>',
        `start of the range: ${DURATION_GRAMMAR} back from now (e.g. 7d), or ${TIMESTAMP_GRAMMAR}; at most ${MAX_USAGE_SPAN_DAYS.hour}d by hour and ${MAX_USAGE_SPAN_DAYS.day}d by day (default: ${DEFAULT_USAGE_SPAN_MS.hour / 3_600_000}h by hour, ${DEFAULT_USAGE_SPAN_MS.day / 86_400_000}d by day)`,
        since,
      )
      .option('--granularity <hour|day>', 'one bucket per hour (default) or per UTC day', granularity, 'hour' as UsageGranularity)
      .action(async (orgId: string, keyId: string, opts: { since?: Since; granularity: UsageGranularity }, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json }) => {
          const from = opts.since === undefined ? undefined : 'at' in opts.since ? opts.since.at : new Date(core.clock.now().getTime() - opts.since.agoMs);
          const query = { granularity: opts.granularity, ...(from !== undefined ? { since: from.toISOString() } : {}) };
          const buckets = await inOrganisation(core, orgId, () => core.usage.ofKey(OPERATOR, orgId, keyId, query));
          emit(json, usageView(buckets), () => usageText(buckets, opts.granularity));
        });
      }),
  );
}
