/**
 * The root test run's setup (.mocharc.cjs `require`s this file), for serial and parallel runs alike.
 *
 * - Parallel runs: every mocha worker gets its own Postgres database (`<TEST_DATABASE_URL's
 *   database>_w<n>`, created here when missing), its own redis-server (spawned here on a free port
 *   when TEST_REDIS_URL is set and redis-server is on the PATH) and its own slice of the topology
 *   ports (REDIS_TOPOLOGY_PORTS), so tests in two workers never share data, a FLUSHALL or a port.
 * - The run ends with a line naming the skipped tests' suites and why they were skipped, and a
 *   list of the tests that used more than a third of their timeout (the budget every test keeps,
 *   so a loaded machine does not turn a slow test into a red one).
 *
 * Mocha calls `mochaGlobalSetup` and `mochaGlobalTeardown` in the main process (with the runner as
 * `this`: every test's events, workers' included, reach it there) and `mochaHooks` in each worker.
 */
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { RedisServer, redisServerAvailable } from '../redis-server.js';
import { createDatabases } from './postgres.js';
import { skipReason, topologyRanges } from './slots.js';

/** Environment handed from the main process to its workers. */
const WORKERS_ENV = 'COS_TEST_WORKERS';
const REPORT_DIR_ENV = 'COS_TEST_REPORT_DIR';

/** One worker's own services. */
interface WorkerSlot {
  readonly databaseUrl?: string;
  readonly redisUrl?: string;
  readonly topologyPorts: string;
}

/**
 * The number of workers: `--jobs` on the command line, else the `jobs` .mocharc.cjs chose (it puts
 * it in COS_TEST_JOBS); 1 when the run is not parallel.
 */
function workerCount(runner: Mocha.Runner, argv: readonly string[] = process.argv): number {
  if (runner.constructor.name !== 'ParallelBufferedRunner') return 1;
  const i = argv.findIndex((a) => a === '--jobs' || a === '-j' || a.startsWith('--jobs='));
  const value = i === -1 ? process.env['COS_TEST_JOBS'] : argv[i]!.startsWith('--jobs=') ? argv[i]!.slice('--jobs='.length) : argv[i + 1];
  const n = Number(value);
  return Number.isInteger(n) && n > 0 ? n : Math.max(1, availableParallelism() - 1);
}

// ---------------------------------------------------------------------------------------------
// Worker side: take this worker's slot before any test file is loaded.

const workerId = process.env['MOCHA_WORKER_ID'];
const slots = process.env[WORKERS_ENV];
if (workerId !== undefined && slots !== undefined) {
  const all = JSON.parse(slots) as WorkerSlot[];
  // A worker that died is replaced by one with the next id: the replacement takes the dead one's slot.
  const slot = all[Number(workerId) % all.length]!;
  if (slot.databaseUrl !== undefined) process.env['TEST_DATABASE_URL'] = slot.databaseUrl;
  if (slot.redisUrl !== undefined) process.env['TEST_REDIS_URL'] = slot.redisUrl;
  process.env['REDIS_TOPOLOGY_PORTS'] = slot.topologyPorts;
}

interface TimeoutUse {
  readonly file: string;
  readonly title: string;
  readonly duration: number;
  readonly timeout: number;
}

let fileStarted = 0;

export const mochaHooks = {
  // In a parallel run the root hooks run once per file: the file's wall time, hooks included.
  beforeAll(): void {
    fileStarted = performance.now();
  },
  afterAll(this: Mocha.Context): void {
    const dir = process.env[REPORT_DIR_ENV];
    const file = this.test?.parent?.suites[0]?.file;
    if (dir === undefined || file === undefined || process.env['MOCHA_WORKER_ID'] === undefined) return;
    const line = JSON.stringify({ file, ms: Math.round(performance.now() - fileStarted) });
    appendFileSync(join(dir, `files-${process.pid}.jsonl`), `${line}\n`);
  },
  afterEach(this: Mocha.Context): void {
    const test = this.currentTest;
    const dir = process.env[REPORT_DIR_ENV];
    if (test === undefined || dir === undefined || test.duration === undefined) return;
    const timeout = test.timeout();
    if (timeout <= 0 || test.duration * 3 <= timeout) return;
    const use: TimeoutUse = { file: test.file ?? '', title: test.fullTitle(), duration: test.duration, timeout };
    appendFileSync(join(dir, `timeouts-${process.pid}.jsonl`), `${JSON.stringify(use)}\n`);
  },
};

// ---------------------------------------------------------------------------------------------
// Main process.

const redisServers: RedisServer[] = [];
const pending: { file: string; title: string }[] = [];
let reportDir: string | undefined;

process.once('exit', () => {
  for (const server of redisServers) void server.kill();
});

async function startRedis(): Promise<string> {
  const server = await RedisServer.start();
  redisServers.push(server);
  return server.url;
}

export async function mochaGlobalSetup(this: Mocha.Runner): Promise<void> {
  reportDir = mkdtempSync(join(tmpdir(), 'cos-test-report-'));
  process.env[REPORT_DIR_ENV] = reportDir;
  this.on('pending', (test: Mocha.Test) => pending.push({ file: test.file ?? '', title: test.fullTitle() }));

  const workers = workerCount(this);
  if (workers === 1) return;
  const databaseUrl = process.env['TEST_DATABASE_URL'] || undefined;
  const redisUrl = process.env['TEST_REDIS_URL'] || undefined;
  const ranges = topologyRanges(workers, process.env['REDIS_TOPOLOGY_PORTS'] || undefined);
  const databases = databaseUrl === undefined ? [] : await createDatabases(databaseUrl, workers);
  const ownRedis = redisUrl !== undefined && redisServerAvailable();
  const redis = ownRedis ? await Promise.all(ranges.map(() => startRedis())) : [];
  const slotsOut: WorkerSlot[] = ranges.map((topologyPorts, i) => ({
    ...(databaseUrl === undefined ? {} : { databaseUrl: databases[i]! }),
    ...(redisUrl === undefined ? {} : { redisUrl: ownRedis ? redis[i]! : redisUrl }),
    topologyPorts,
  }));
  process.env[WORKERS_ENV] = JSON.stringify(slotsOut);
}

/** The JSON lines every process wrote to the report folder under `prefix`. */
function reportLines<T>(prefix: string): T[] {
  if (reportDir === undefined) return [];
  const out: T[] = [];
  for (const name of readdirSync(reportDir).filter((n) => n.startsWith(prefix))) {
    for (const line of readFileSync(join(reportDir, name), 'utf8').split('\n')) if (line !== '') out.push(JSON.parse(line) as T);
  }
  return out;
}

function closingLines(): string[] {
  const lines: string[] = [];
  const root = process.cwd();
  if (pending.length === 0) {
    lines.push('Skipped: nothing.');
  } else {
    const byReason = new Map<string, Map<string, number>>();
    for (const p of pending) {
      const why = skipReason(p.file, p.title, process.env);
      const files = byReason.get(why) ?? new Map<string, number>();
      const name = relative(root, p.file) || p.title;
      files.set(name, (files.get(name) ?? 0) + 1);
      byReason.set(why, files);
    }
    const parts = [...byReason].map(([why, files]) => `${why}: ${[...files].map(([f, n]) => `${f} (${n})`).join(', ')}`);
    lines.push(`Skipped ${pending.length} tests. ${parts.join('; ')}.`);
  }
  const uses = reportLines<TimeoutUse>('timeouts-');
  const files = reportLines<{ file: string; ms: number }>('files-').sort((a, b) => b.ms - a.ms);
  if (files.length > 0) {
    const total = files.reduce((sum, f) => sum + f.ms, 0);
    const slowest = files.slice(0, 8).map((f) => `${relative(root, f.file)} ${(f.ms / 1000).toFixed(1)} s`);
    lines.push(`Files: ${files.length}, ${(total / 1000).toFixed(0)} s in all; slowest: ${slowest.join(', ')}.`);
  }
  if (uses.length === 0) {
    lines.push('Timeouts: every test used at most a third of its timeout.');
  } else {
    lines.push(`Timeouts: ${uses.length} tests used more than a third of their timeout:`);
    for (const u of uses.sort((a, b) => b.duration / b.timeout - a.duration / a.timeout)) {
      lines.push(`  ${u.duration} ms of ${u.timeout} ms: ${relative(root, u.file)}: ${u.title}`);
    }
  }
  return lines;
}

export async function mochaGlobalTeardown(): Promise<void> {
  const lines = closingLines();
  // stderr: stdout may carry a machine-read report (--reporter json).
  process.stderr.write(`\n${lines.join('\n')}\n`);
  await Promise.all(redisServers.splice(0).map((server) => server.kill()));
  if (reportDir !== undefined) rmSync(reportDir, { recursive: true, force: true });
}
