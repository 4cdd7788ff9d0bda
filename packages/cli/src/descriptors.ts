/**
 * The process's file-descriptor budget and the default connection cap derived from it.
 *
 * Every accepted connection holds a descriptor. When the process runs out (EMFILE), accept() fails
 * and libuv drops the waiting connections to keep going: legitimate clients see ECONNRESET. So the
 * listener caps its connections below the soft RLIMIT_NOFILE, leaving a reserve for what else needs
 * descriptors: the store's pool (10 connections by default) and SQLite's files, Redis, webhook
 * deliveries (up to 10 at once), the operations listener (OPS_MAX_CONNECTIONS), log output, and the
 * runtime's own (epoll, pipes, signals).
 *
 * The rule: reserve = a quarter of the limit, at least 32 and at most 256; default cap = limit -
 * reserve (768 at 1024, 192 at 256, 65,280 at 65,536). An unlimited limit counts as 65,536, an
 * unknown one (no /proc and no `sh`) as 1,024.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** What the rule assumes when the limit cannot be read. */
const ASSUMED_DESCRIPTOR_LIMIT = 1_024;
/** What an unlimited (RLIM_INFINITY) limit counts as: beyond it, memory is the limit, not descriptors. */
const UNLIMITED_DESCRIPTOR_LIMIT = 65_536;
const MIN_RESERVE = 32;
const MAX_RESERVE = 256;

/** The soft "Max open files" of a /proc/<pid>/limits text; null when absent; Infinity for unlimited. */
export function parseProcLimits(text: string): number | null {
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(text);
  if (m === null) return null;
  return m[1] === 'unlimited' ? Number.POSITIVE_INFINITY : Number(m[1]);
}

/**
 * The soft RLIMIT_NOFILE of this process: /proc/self/limits on Linux, else `ulimit -n` of a child
 * shell (which inherits the limit), else null.
 */
export function softDescriptorLimit(): number | null {
  try {
    const limit = parseProcLimits(readFileSync('/proc/self/limits', 'utf8'));
    if (limit !== null) return limit;
  } catch {
    // Not Linux: ask a shell.
  }
  try {
    const r = spawnSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8', timeout: 2_000 });
    const text = (r.stdout ?? '').trim();
    if (r.status === 0 && text === 'unlimited') return Number.POSITIVE_INFINITY;
    if (r.status === 0 && /^\d+$/.test(text)) return Number(text);
  } catch {
    // No shell: the assumed limit.
  }
  return null;
}

/** The default MAX_CONNECTIONS for a soft descriptor limit (null: unknown). */
export function defaultMaxConnections(softLimit: number | null): number {
  const limit = softLimit === null ? ASSUMED_DESCRIPTOR_LIMIT : Math.min(softLimit, UNLIMITED_DESCRIPTOR_LIMIT);
  const reserve = Math.min(MAX_RESERVE, Math.max(MIN_RESERVE, Math.floor(limit / 4)));
  return Math.max(1, limit - reserve);
}
