/**
 * `serve`'s processes (node:cluster): a primary that forks N workers behind one port, supervises
 * them and relays signals, and the workers that serve (commands/serve.ts). The primary does no
 * request work: it loads no store, Koa or Redis. Connections are handed to the workers round-robin
 * by the primary's listening socket (node:cluster's default on Linux).
 *
 * - Start: the first worker starts alone (it applies SQLite's pending migrations and, with
 *   --bootstrap, bootstraps), the others once it listens; a worker that fails to start stops the
 *   start (the others are stopped, the primary exits with its exit code; the worker has said why on
 *   stderr). Each worker is its own instance for the instance registry (its own credential cache).
 * - Memory: every worker runs with `--max-old-space-size` derived from MEMORY_LIMIT_MB
 *   (memory-limit.ts), unless the operator already gave Node a heap limit.
 * - A worker that exits unexpectedly is replaced in the same slot (its `worker` label), at once
 *   the first time and after a doubling delay (up to MAX_RESTART_DELAY_MS) while it keeps failing
 *   within STABLE_MS of starting.
 * - SIGTERM/SIGINT: the primary logs its last line, then every worker is asked to drain (a message, so a Ctrl-C that also reached the
 *   workers directly is not a second signal to them); a second signal cuts the drains short. The
 *   primary exits once every worker has, 0 when all exited 0; past the grace period and the close
 *   bound it kills what is left and exits 1. SIGHUP is passed on to every worker.
 * - The operations listener (OPS_PORT) is the primary's: /readyz is 200 only while every worker
 *   listens and answers its store probe (asked over IPC); /metrics gathers every worker's
 *   registry over IPC, each series labelled with its worker slot (metrics.ts, PrimaryMetrics).
 */
import cluster, { type Worker } from 'node:cluster';
import type { AppConfig } from './config.js';
import { describeError, CliError } from './errors.js';
import { lifecycle } from './lifecycle.js';
import { cgroupMemoryLimitMb, operatorHeapFlag, planMemory } from './memory-limit.js';
import type { MetricsJson } from './metrics.js';
import { SHUTDOWN_GRACE_MS } from './server.js';

/** Environment the primary gives a worker: its slot (1 to N), whether it is the first of a start, the ops listener's URL. */
const ENV_SLOT = 'COS_WORKER_SLOT';
const ENV_FIRST = 'COS_WORKER_FIRST';
const ENV_OPS = 'COS_WORKER_OPS_URL';

/** A worker that listened this long before it exited counts as a fresh failure (no back-off). */
const STABLE_MS = 10_000;
/** The delay before the second replacement in a row; each further one doubles it. */
const FIRST_RESTART_DELAY_MS = 500;
const MAX_RESTART_DELAY_MS = 30_000;
/** Beyond the workers' own bound (grace period and closing, serve.ts): then they are killed. */
const WORKER_EXIT_MARGIN_MS = 5_000;
/** How long the primary's last log lines may take to reach stdout at shutdown. */
const LOG_CLOSE_MS = 300;
const OPS_CLOSE_MS = 1_000;
const OPS_MAX_CONNECTIONS = 32;
/** A worker's probe answer (its store probe is bounded by 1 s) and its metrics. */
const ASK_TIMEOUT_MS = 2_000;

/** What a worker tells the primary once it listens. */
export interface WorkerInfo {
  readonly address: string;
  readonly host: string;
  readonly port: number;
  readonly store: string;
  readonly limiter: string;
  readonly max_connections: number;
  readonly heap_limit_mb: number;
  readonly version: string;
}

type Question = 'health' | 'metrics';
type ToWorker = { readonly cos: 'ask'; readonly id: number; readonly what: Question } | { readonly cos: 'stop'; readonly force: boolean; readonly signal?: NodeJS.Signals } | { readonly cos: 'ack' };
type ToPrimary = { readonly cos: 'ready'; readonly info: WorkerInfo } | { readonly cos: 'answer'; readonly id: number; readonly value: unknown };

// ---- in a worker ----

/** This worker's slot, 1 to N. */
export function workerSlot(): number {
  return Number(process.env[ENV_SLOT] ?? '1');
}

/** Whether this worker is the first of a start (it alone bootstraps; the others start after it). */
export function firstWorkerOfStart(): boolean {
  return process.env[ENV_FIRST] !== '0';
}

/** The primary's operations listener, for the start-up line; null when OPS_PORT is unset. */
export function workerOpsUrl(): string | null {
  return process.env[ENV_OPS] || null;
}

export interface WorkerAnswers {
  /** null: ready; else why not. */
  health(): Promise<string | null>;
  metrics(): Promise<MetricsJson>;
  /** The primary's stop: the first starts the drain, `force` cuts it short. */
  stop(force: boolean, signal: NodeJS.Signals | undefined): void;
}

let acknowledged: (() => void) | undefined;

/** Answers the primary's questions and stop requests. */
export function onPrimaryMessage(answers: WorkerAnswers): void {
  process.on('message', (message: ToWorker) => {
    if (typeof message !== 'object' || message === null) return;
    if (message.cos === 'stop') answers.stop(message.force, message.signal);
    else if (message.cos === 'ack') acknowledged?.();
    else if (message.cos === 'ask') {
      const work = message.what === 'health' ? answers.health() : answers.metrics();
      work.then(
        (value) => send({ cos: 'answer', id: message.id, value }),
        (e: unknown) => send({ cos: 'answer', id: message.id, value: message.what === 'health' ? describeError(e) : [] }),
      );
    }
  });
}

function send(message: ToPrimary): void {
  if (process.connected) process.send?.(message, undefined, undefined, () => undefined);
}

/**
 * Tells the primary this worker listens, and resolves once the primary has counted it (so /readyz
 * already answers for it when the start-up line appears), or after a second without an answer.
 */
export function tellPrimary(message: { readonly type: 'ready'; readonly info: WorkerInfo }): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 1_000);
    acknowledged = () => {
      clearTimeout(timer);
      resolve();
    };
    send({ cos: 'ready', info: message.info });
  });
}

// ---- in the primary ----

interface Slot {
  readonly slot: number;
  worker: Worker | null;
  ready: boolean;
  info: WorkerInfo | null;
  /** Unexpected exits in a row, each within STABLE_MS of the worker's start. */
  failures: number;
  startedAt: number;
  restartTimer: NodeJS.Timeout | undefined;
}

export interface PrimaryOptions {
  readonly config: AppConfig;
  readonly workers: number;
}

/**
 * Runs the primary: forks the workers, resolves once all listen (the process then lives until
 * SIGTERM/SIGINT). A worker that fails to start ends the process with that worker's exit status.
 */
export async function runPrimary(options: PrimaryOptions): Promise<void> {
  const { config, workers } = options;
  const { createLogger } = await import('./logger.js');
  const logger = createLogger({ level: config.logLevel, fd: 1, base: { worker: 'primary', pid: process.pid } });
  const plan = planMemory({ configuredMb: config.memoryLimitMb, workers, cgroupMb: cgroupMemoryLimitMb() });
  const operatorFlag = operatorHeapFlag(process.execArgv, process.env['NODE_OPTIONS']);
  if (plan.belowMinimum && operatorFlag === null) {
    logger.warn(
      { memory_limit_mb: plan.limitMb, source: plan.source, workers, max_old_space_mb: plan.oldSpaceMb },
      'the memory limit is too small for this many workers: each gets the smallest heap serve allows, and together they may exceed it',
    );
  }
  // The workers run this same command line, with the heap limit added (the operator's own wins).
  cluster.setupPrimary({ execArgv: [...process.execArgv, ...(operatorFlag === null ? [`--max-old-space-size=${plan.oldSpaceMb}`] : [])], silent: false });

  const slots = new Map<number, Slot>();
  for (let slot = 1; slot <= workers; slot += 1) {
    slots.set(slot, { slot, worker: null, ready: false, info: null, failures: 0, startedAt: 0, restartTimer: undefined });
  }
  let phase: 'starting' | 'serving' | 'stopping' = 'starting';
  /** The exit status of the first worker that failed to start, or of the shutdown. */
  let exitCode = 0;

  // ---- questions to workers ----
  let nextQuestion = 0;
  const answers = new Map<number, (value: unknown) => void>();
  const ask = (worker: Worker, what: Question): Promise<unknown> =>
    new Promise((resolve) => {
      const id = (nextQuestion += 1);
      const done = (value: unknown): void => {
        clearTimeout(timer);
        answers.delete(id);
        resolve(value);
      };
      const timer = setTimeout(() => done(undefined), ASK_TIMEOUT_MS);
      answers.set(id, done);
      if (!worker.isConnected()) return done(undefined);
      worker.send({ cos: 'ask', id, what } satisfies ToWorker, undefined, (e) => {
        if (e) done(undefined);
      });
    });
  const readySlots = (): Slot[] => [...slots.values()].filter((s) => s.ready && s.worker !== null);

  // ---- the operations listener ----
  let ops: { app: import('./ops-server.js').OpsApp; server: import('./server.js').RunningServer } | undefined;
  let metrics: import('./metrics.js').PrimaryMetrics | undefined;
  if (config.opsPort !== null) {
    const [{ createOpsApp }, { PrimaryMetrics }, { listen }] = await Promise.all([import('./ops-server.js'), import('./metrics.js'), import('./server.js')]);
    const registry = new PrimaryMetrics();
    registry.workers(workers);
    metrics = registry;
    const readiness = async (): Promise<string | null> => {
      const notReady = [...slots.values()].filter((s) => !s.ready || s.worker === null).map((s) => s.slot);
      if (notReady.length > 0) return `worker ${notReady.join(', ')} not ready`;
      const replies = await Promise.all(readySlots().map(async (s) => ({ slot: s.slot, reply: await ask(s.worker!, 'health') })));
      for (const { slot, reply } of replies) {
        if (reply === undefined) return `worker ${slot} did not answer`;
        if (reply !== null) return String(reply);
      }
      return null;
    };
    const app = createOpsApp({
      health: { check: async () => ({ status: (await readiness()) === null ? 'ok' : 'unavailable', timestamp: new Date().toISOString() }) },
      readiness,
      metrics: {
        render: async () => {
          const gathered = await Promise.all(readySlots().map(async (s) => ({ slot: s.slot, metrics: (await ask(s.worker!, 'metrics')) as MetricsJson | undefined })));
          return registry.render(gathered.filter((g): g is { slot: number; metrics: MetricsJson } => Array.isArray(g.metrics)));
        },
        contentType: registry.contentType,
      },
    });
    const server = await listen(app, config.opsHost, config.opsPort, logger, {
      idleGraceMs: 0,
      maxConnections: OPS_MAX_CONNECTIONS,
      headersTimeoutMs: config.headersTimeoutMs,
      requestTimeoutMs: config.requestTimeoutMs,
    }).catch((e: unknown) => {
      const code = (e as { code?: string }).code;
      throw new CliError(`cannot listen on ${config.opsHost}:${config.opsPort} (OPS_HOST, OPS_PORT): ${code === 'EADDRINUSE' ? 'the address is already in use' : describeError(e)}`);
    });
    ops = { app, server };
  }

  // ---- workers ----
  let first = true;
  let allReady: (() => void) | undefined;
  let startFailed: ((code: number) => void) | undefined;
  const fork = (s: Slot, firstOfStart: boolean): void => {
    s.restartTimer = undefined;
    s.startedAt = Date.now();
    s.ready = false;
    s.worker = cluster.fork({ [ENV_SLOT]: String(s.slot), [ENV_FIRST]: firstOfStart ? '1' : '0', ...(ops === undefined ? {} : { [ENV_OPS]: ops.server.url }) });
  };
  const bySlot = (worker: Worker): Slot | undefined => [...slots.values()].find((s) => s.worker === worker);

  cluster.on('message', (worker: Worker, message: ToPrimary) => {
    if (typeof message !== 'object' || message === null) return;
    if (message.cos === 'answer') {
      answers.get(message.id)?.(message.value);
      return;
    }
    if (message.cos !== 'ready') return;
    const s = bySlot(worker);
    if (s === undefined) return;
    s.ready = true;
    s.info = message.info;
    metrics?.workersReady(readySlots().length);
    if (phase === 'starting') {
      if (s.slot === 1 && first) {
        first = false;
        for (const other of slots.values()) if (other.slot !== 1) fork(other, false);
      }
      // Serving (and /readyz 200) before the last worker is acknowledged and prints its start-up line.
      if (readySlots().length === slots.size) allReady?.();
    } else if (phase === 'serving') {
      logger.info({ worker: s.slot, worker_id: worker.id, worker_pid: worker.process.pid, heap_limit_mb: message.info.heap_limit_mb }, `worker ${s.slot} replaced: listening again`);
    }
    if (worker.isConnected()) worker.send({ cos: 'ack' } satisfies ToWorker, undefined, () => undefined);
  });

  cluster.on('exit', (worker: Worker, code: number | null, signal: NodeJS.Signals | null) => {
    const s = bySlot(worker);
    if (s === undefined) return;
    const wasReady = s.ready;
    s.worker = null;
    s.ready = false;
    metrics?.workersReady(readySlots().length);
    if (phase === 'stopping') {
      if (exitCode === 0 && code !== 0 && !(code === null && signal === 'SIGTERM' && !wasReady)) exitCode = 1;
      if ([...slots.values()].every((x) => x.worker === null)) void finish();
      return;
    }
    if (phase === 'starting') {
      startFailed?.(code ?? 1);
      return;
    }
    s.failures = Date.now() - s.startedAt >= STABLE_MS ? 1 : s.failures + 1;
    const delay = s.failures <= 1 ? 0 : Math.min(MAX_RESTART_DELAY_MS, FIRST_RESTART_DELAY_MS * 2 ** (s.failures - 2));
    logger.error(
      { worker: s.slot, worker_id: worker.id, worker_pid: worker.process.pid, code, signal, restart_in_ms: delay },
      `worker ${s.slot} exited unexpectedly; ${delay === 0 ? 'replacing it' : `replacing it in ${delay} ms`}`,
    );
    metrics?.restarted(s.slot);
    s.restartTimer = setTimeout(() => fork(s, false), delay);
  });

  // ---- stopping ----
  let finishing: Promise<void> | undefined;
  const finish = (): Promise<void> =>
    (finishing ??= (async () => {
      await ops?.server.stop(OPS_CLOSE_MS).catch(() => undefined);
      await logger.close(LOG_CLOSE_MS);
      process.exit(exitCode);
    })());
  const stopWorkers = (force: boolean, signal?: NodeJS.Signals): void => {
    for (const s of slots.values()) {
      clearTimeout(s.restartTimer);
      s.restartTimer = undefined;
      const worker = s.worker;
      if (worker === null) continue;
      // A worker not listening yet may not have its handlers: the signal ends it (or starts its drain).
      if (!s.ready || !worker.isConnected()) worker.process.kill('SIGTERM');
      else worker.send({ cos: 'stop', force, ...(signal !== undefined ? { signal } : {}) } satisfies ToWorker, undefined, () => undefined);
    }
  };
  let signals = 0;
  const shutdown = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) {
      stopWorkers(true, signal);
      ops?.server.destroyAll();
      return;
    }
    phase = 'stopping';
    if (ops !== undefined) ops.app.phase = 'draining';
    setTimeout(() => {
      for (const s of slots.values()) s.worker?.process.kill('SIGKILL');
      exitCode = 1;
      void finish();
    }, SHUTDOWN_GRACE_MS + WORKER_EXIT_MARGIN_MS).unref();
    // The primary writes nothing more: its log is closed before the workers stop. stdout is one open
    // file shared with the workers, and a Node process puts it back into blocking mode when it forks
    // or exits; a line the primary started into a full pipe (a stalled reader) would then hold a
    // thread that process.exit waits for, and the primary would never exit. Each worker logs its own
    // shutdown (naming the signal the primary received); the exit status says how it ended.
    void logger.close(LOG_CLOSE_MS).then(() => {
      stopWorkers(false, signal);
      if ([...slots.values()].every((x) => x.worker === null)) void finish();
    });
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  process.on('SIGHUP', () => {
    for (const s of slots.values()) s.worker?.process.kill('SIGHUP');
  });

  const serving = (): void => {
    phase = 'serving';
    if (ops !== undefined) ops.app.phase = 'serving';
    const info = slots.get(1)!.info!;
    logger.info(
      {
        workers,
        worker_pids: [...slots.values()].map((s) => s.worker?.process.pid ?? null),
        port: info.port,
        memory_limit_mb: plan.limitMb,
        memory_limit_source: plan.source,
        max_old_space_mb: operatorFlag === null ? plan.oldSpaceMb : null,
        heap_limit_mb: info.heap_limit_mb,
        ...(operatorFlag === null ? {} : { heap_limit_flag: operatorFlag }),
      },
      `cos ready: ${workers} worker${workers === 1 ? '' : 's'} on port ${info.port}`,
    );
  };
  const started = await new Promise<number>((resolve) => {
    allReady = () => {
      serving();
      resolve(0);
    };
    startFailed = (code) => resolve(code === 0 ? 1 : code);
    fork(slots.get(1)!, true);
  });
  lifecycle.daemon = true;
  if (started !== 0 && phase === 'starting') {
    // The worker said why on stderr: stop any other and end with its status.
    phase = 'stopping';
    exitCode = started;
    stopWorkers(false);
    if ([...slots.values()].every((x) => x.worker === null)) await finish();
  }
}
