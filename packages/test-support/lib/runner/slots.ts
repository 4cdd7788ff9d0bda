/**
 * The parallel test run's bookkeeping, apart from the processes it starts: how the topology ports
 * are split between workers, and why a skipped test did not run.
 */

/**
 * `workers` disjoint slices of REDIS_TOPOLOGY_PORTS (`low-high`), one per worker. A cluster takes 6
 * ports (and their bus ports, +10000) and is retried on new ones when a port is taken meanwhile:
 * each slice holds at least 12.
 */
export function topologyRanges(workers: number, range = '7100-7199'): string[] {
  const [low, high] = range.split('-').map(Number) as [number, number];
  const size = Math.floor((high - low + 1) / workers);
  if (size < 12) throw new Error(`REDIS_TOPOLOGY_PORTS ${low}-${high} is too small for ${workers} workers (12 ports each)`);
  return Array.from({ length: workers }, (_, i) => `${low + i * size}-${low + (i + 1) * size - 1}`);
}

/** Why a skipped test did not run, from the words of its file and titles. */
export function skipReason(file: string, title: string, env: NodeJS.ProcessEnv): string {
  const text = `${file} ${title}`;
  const set = (name: string): boolean => (env[name] ?? '') !== '';
  if (/needs redis-server|redis-cli on PATH|redis-server on PATH/i.test(text)) return 'redis-server / redis-cli not on the PATH';
  if (/postgres|TEST_DATABASE_URL/i.test(text)) return set('TEST_DATABASE_URL') ? 'Postgres (TEST_DATABASE_URL is set)' : 'Postgres: no TEST_DATABASE_URL';
  if (/TEST_REDIS_URL/i.test(text) || (/redis/i.test(text) && !set('TEST_REDIS_URL'))) {
    return set('TEST_REDIS_URL') ? 'Redis (TEST_REDIS_URL is set)' : 'Redis: no TEST_REDIS_URL';
  }
  return 'skipped by the test itself';
}
