/**
 * `serve`'s primary process (node:cluster): a Supervisor that forks N workers behind one port,
 * replaces the ones that die, answers the operations listener for all of them and relays signals.
 * It does no request work: it loads no store, Koa or Redis. Connections are handed to the workers
 * round-robin by the primary's listening socket (node:cluster's default on Linux). Each worker is
 * a WorkerLifecycle (worker-lifecycle.ts); workers.ts holds the messages between them.
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
import type { CosLogger } from './logger.js';
import { cgroupMemoryLimitMb, operatorHeapFlag, planMemory, type MemoryPlan } from './memory-limit.js';
import type { MetricsJson, PrimaryMetrics } from './metrics.js';
import type { OpsApp } from './ops-server.js';
import { SHUTDOWN_GRACE_MS, type RunningServer } from './server.js';
import { ENV_FIRST, ENV_OPS, ENV_SLOT, type Question, type ToPrimary, type ToWorker, type WorkerInfo } from './workers.js';

/** A worker that listened this long before it exited counts as a fresh failure (no back-off). */
const STABLE_MS = 10_000;
/** The delay before the second replacement in a row; each further one doubles it. */
const FIRST_RESTART_DELAY_MS = 500;
const MAX_RESTART_DELAY_MS = 30_000;
/** Beyond the workers' own bound (grace period and closing, worker-lifecycle.ts): then they are killed. */
const WORKER_EXIT_MARGIN_MS = 5_000;
/** How long the primary's last log lines may take to reach stdout at shutdown. */
const LOG_CLOSE_MS = 300;
const OPS_CLOSE_MS = 1_000;
const OPS_MAX_CONNECTIONS = 32;
/** A worker's probe answer (its store probe is bounded by 1 s) and its metrics. */
const ASK_TIMEOUT_MS = 2_000;

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

export class Supervisor {
  readonly #config: AppConfig;
  readonly #workers: number;
  readonly #slots = new Map<number, Slot>();
  #logger!: CosLogger;
  #plan!: MemoryPlan;
  #operatorFlag: string | null = null;
  #phase: 'starting' | 'serving' | 'stopping' = 'starting';
  /** The exit status of the first worker that failed to start, or of the shutdown. */
  #exitCode = 0;
  #nextQuestion = 0;
  readonly #answers = new Map<number, (value: unknown) => void>();
  #ops: { app: OpsApp; server: RunningServer } | undefined;
  #metrics: PrimaryMetrics | undefined;
  #first = true;
  #allReady: (() => void) | undefined;
  #startFailed: ((code: number) => void) | undefined;
  #finishing: Promise<void> | undefined;
  #signals = 0;

  constructor(options: PrimaryOptions) {
    this.#config = options.config;
    this.#workers = options.workers;
    for (let slot = 1; slot <= options.workers; slot += 1) {
      this.#slots.set(slot, { slot, worker: null, ready: false, info: null, failures: 0, startedAt: 0, restartTimer: undefined });
    }
  }

  /**
   * Forks the workers, resolves once all listen (the process then lives until SIGTERM/SIGINT). A
   * worker that fails to start ends the process with that worker's exit status.
   */
  async run(): Promise<void> {
    const config = this.#config;
    const { createLogger } = await import('./logger.js');
    this.#logger = createLogger({ level: config.logLevel, fd: 1, base: { worker: 'primary', pid: process.pid } });
    this.#planMemory();
    await this.#openOps();
    cluster.on('message', (worker: Worker, message: ToPrimary) => this.#onMessage(worker, message));
    cluster.on('exit', (worker: Worker, code: number | null, signal: NodeJS.Signals | null) => this.#onExit(worker, code, signal));
    const shutdown = (signal: NodeJS.Signals): void => this.#shutdown(signal);
    process.on('SIGTERM', shutdown);
    process.on('SIGINT', shutdown);
    process.on('SIGHUP', () => {
      for (const s of this.#slots.values()) s.worker?.process.kill('SIGHUP');
    });
    const started = await new Promise<number>((resolve) => {
      this.#allReady = () => {
        this.#serving();
        resolve(0);
      };
      this.#startFailed = (code) => resolve(code === 0 ? 1 : code);
      this.#fork(this.#slots.get(1)!, true);
    });
    lifecycle.daemon = true;
    if (started !== 0 && this.#phase === 'starting') {
      // The worker said why on stderr: stop any other and end with its status.
      this.#phase = 'stopping';
      this.#exitCode = started;
      this.#stopWorkers(false);
      if (this.#allExited()) await this.#finish();
    }
  }

  /** Each worker's heap limit; the workers run this same command line, with it added (the operator's own wins). */
  #planMemory(): void {
    const workers = this.#workers;
    const plan = planMemory({ configuredMb: this.#config.memoryLimitMb, workers, cgroupMb: cgroupMemoryLimitMb() });
    const operatorFlag = operatorHeapFlag(process.execArgv, process.env['NODE_OPTIONS']);
    if (plan.belowMinimum && operatorFlag === null) {
      this.#logger.warn(
        { memory_limit_mb: plan.limitMb, source: plan.source, workers, max_old_space_mb: plan.oldSpaceMb },
        'the memory limit is too small for this many workers: each gets the smallest heap serve allows, and together they may exceed it',
      );
    }
    cluster.setupPrimary({ execArgv: [...process.execArgv, ...(operatorFlag === null ? [`--max-old-space-size=${plan.oldSpaceMb}`] : [])], silent: false });
    this.#plan = plan;
    this.#operatorFlag = operatorFlag;
  }

  // ---- questions to workers ----

  #ask(worker: Worker, what: Question): Promise<unknown> {
    return new Promise((resolve) => {
      const id = (this.#nextQuestion += 1);
      const done = (value: unknown): void => {
        clearTimeout(timer);
        this.#answers.delete(id);
        resolve(value);
      };
      const timer = setTimeout(() => done(undefined), ASK_TIMEOUT_MS);
      this.#answers.set(id, done);
      if (!worker.isConnected()) return done(undefined);
      worker.send({ cos: 'ask', id, what } satisfies ToWorker, undefined, (e) => {
        if (e) done(undefined);
      });
    });
  }

  #readySlots(): Slot[] {
    return [...this.#slots.values()].filter((s) => s.ready && s.worker !== null);
  }

  #allExited(): boolean {
    return [...this.#slots.values()].every((x) => x.worker === null);
  }

  // ---- the operations listener ----

  async #openOps(): Promise<void> {
    const config = this.#config;
    if (config.opsPort === null) return;
    const [{ createOpsApp }, { PrimaryMetrics }, { listen }] = await Promise.all([import('./ops-server.js'), import('./metrics.js'), import('./server.js')]);
    const registry = new PrimaryMetrics();
    registry.workers(this.#workers);
    this.#metrics = registry;
    const readiness = async (): Promise<string | null> => {
      const notReady = [...this.#slots.values()].filter((s) => !s.ready || s.worker === null).map((s) => s.slot);
      if (notReady.length > 0) return `worker ${notReady.join(', ')} not ready`;
      const replies = await Promise.all(this.#readySlots().map(async (s) => ({ slot: s.slot, reply: await this.#ask(s.worker!, 'health') })));
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
          const gathered = await Promise.all(this.#readySlots().map(async (s) => ({ slot: s.slot, metrics: (await this.#ask(s.worker!, 'metrics')) as MetricsJson | undefined })));
          return registry.render(gathered.filter((g): g is { slot: number; metrics: MetricsJson } => Array.isArray(g.metrics)));
        },
        contentType: registry.contentType,
      },
    });
    const server = await listen(app, config.opsHost, config.opsPort, this.#logger, {
      idleGraceMs: 0,
      maxConnections: OPS_MAX_CONNECTIONS,
      headersTimeoutMs: config.headersTimeoutMs,
      requestTimeoutMs: config.requestTimeoutMs,
    }).catch((e: unknown) => {
      const code = (e as { code?: string }).code;
      throw new CliError(`cannot listen on ${config.opsHost}:${config.opsPort} (OPS_HOST, OPS_PORT): ${code === 'EADDRINUSE' ? 'the address is already in use' : describeError(e)}`);
    });
    this.#ops = { app, server };
  }

  // ---- workers ----

  #fork(s: Slot, firstOfStart: boolean): void {
    s.restartTimer = undefined;
    s.startedAt = Date.now();
    s.ready = false;
    const ops = this.#ops;
    s.worker = cluster.fork({ [ENV_SLOT]: String(s.slot), [ENV_FIRST]: firstOfStart ? '1' : '0', ...(ops === undefined ? {} : { [ENV_OPS]: ops.server.url }) });
  }

  #bySlot(worker: Worker): Slot | undefined {
    return [...this.#slots.values()].find((s) => s.worker === worker);
  }

  #onMessage(worker: Worker, message: ToPrimary): void {
    if (typeof message !== 'object' || message === null) return;
    if (message.cos === 'answer') {
      this.#answers.get(message.id)?.(message.value);
      return;
    }
    if (message.cos !== 'ready') return;
    const s = this.#bySlot(worker);
    if (s === undefined) return;
    s.ready = true;
    s.info = message.info;
    this.#metrics?.workersReady(this.#readySlots().length);
    if (this.#phase === 'starting') {
      if (s.slot === 1 && this.#first) {
        this.#first = false;
        for (const other of this.#slots.values()) if (other.slot !== 1) this.#fork(other, false);
      }
      // Serving (and /readyz 200) before the last worker is acknowledged and prints its start-up line.
      if (this.#readySlots().length === this.#slots.size) this.#allReady?.();
    } else if (this.#phase === 'serving') {
      this.#logger.info(
        { worker: s.slot, worker_id: worker.id, worker_pid: worker.process.pid, heap_limit_mb: message.info.heap_limit_mb },
        `worker ${s.slot} replaced: listening again`,
      );
    }
    if (worker.isConnected()) worker.send({ cos: 'ack' } satisfies ToWorker, undefined, () => undefined);
  }

  #onExit(worker: Worker, code: number | null, signal: NodeJS.Signals | null): void {
    const s = this.#bySlot(worker);
    if (s === undefined) return;
    const wasReady = s.ready;
    s.worker = null;
    s.ready = false;
    this.#metrics?.workersReady(this.#readySlots().length);
    if (this.#phase === 'stopping') {
      if (this.#exitCode === 0 && code !== 0 && !(code === null && signal === 'SIGTERM' && !wasReady)) this.#exitCode = 1;
      if (this.#allExited()) void this.#finish();
      return;
    }
    if (this.#phase === 'starting') {
      this.#startFailed?.(code ?? 1);
      return;
    }
    s.failures = Date.now() - s.startedAt >= STABLE_MS ? 1 : s.failures + 1;
    const delay = s.failures <= 1 ? 0 : Math.min(MAX_RESTART_DELAY_MS, FIRST_RESTART_DELAY_MS * 2 ** (s.failures - 2));
    this.#logger.error(
      { worker: s.slot, worker_id: worker.id, worker_pid: worker.process.pid, code, signal, restart_in_ms: delay },
      `worker ${s.slot} exited unexpectedly; ${delay === 0 ? 'replacing it' : `replacing it in ${delay} ms`}`,
    );
    this.#metrics?.restarted(s.slot);
    s.restartTimer = setTimeout(() => this.#fork(s, false), delay);
  }

  #serving(): void {
    this.#phase = 'serving';
    if (this.#ops !== undefined) this.#ops.app.phase = 'serving';
    const info = this.#slots.get(1)!.info!;
    const plan = this.#plan;
    const operatorFlag = this.#operatorFlag;
    const workers = this.#workers;
    this.#logger.info(
      {
        workers,
        worker_pids: [...this.#slots.values()].map((s) => s.worker?.process.pid ?? null),
        port: info.port,
        memory_limit_mb: plan.limitMb,
        memory_limit_source: plan.source,
        max_old_space_mb: operatorFlag === null ? plan.oldSpaceMb : null,
        heap_limit_mb: info.heap_limit_mb,
        ...(operatorFlag === null ? {} : { heap_limit_flag: operatorFlag }),
      },
      `cos ready: ${workers} worker${workers === 1 ? '' : 's'} on port ${info.port}`,
    );
  }

  // ---- stopping ----

  #finish(): Promise<void> {
    return (this.#finishing ??= (async () => {
      await this.#ops?.server.stop(OPS_CLOSE_MS).catch(() => undefined);
      await this.#logger.close(LOG_CLOSE_MS);
      process.exit(this.#exitCode);
    })());
  }

  #stopWorkers(force: boolean, signal?: NodeJS.Signals): void {
    for (const s of this.#slots.values()) {
      clearTimeout(s.restartTimer);
      s.restartTimer = undefined;
      const worker = s.worker;
      if (worker === null) continue;
      // A worker not listening yet may not have its handlers: the signal ends it (or starts its drain).
      if (!s.ready || !worker.isConnected()) worker.process.kill('SIGTERM');
      else worker.send({ cos: 'stop', force, ...(signal !== undefined ? { signal } : {}) } satisfies ToWorker, undefined, () => undefined);
    }
  }

  #shutdown(signal: NodeJS.Signals): void {
    this.#signals += 1;
    if (this.#signals > 1) {
      this.#stopWorkers(true, signal);
      this.#ops?.server.destroyAll();
      return;
    }
    this.#phase = 'stopping';
    if (this.#ops !== undefined) this.#ops.app.phase = 'draining';
    setTimeout(() => {
      for (const s of this.#slots.values()) s.worker?.process.kill('SIGKILL');
      this.#exitCode = 1;
      void this.#finish();
    }, SHUTDOWN_GRACE_MS + WORKER_EXIT_MARGIN_MS).unref();
    // The primary writes nothing more: its log is closed before the workers stop. stdout is one open
    // file shared with the workers, and a Node process puts it back into blocking mode when it forks
    // or exits; a line the primary started into a full pipe (a stalled reader) would then hold a
    // thread that process.exit waits for, and the primary would never exit. Each worker logs its own
    // shutdown (naming the signal the primary received); the exit status says how it ended.
    void this.#logger.close(LOG_CLOSE_MS).then(() => {
      this.#stopWorkers(false, signal);
      if (this.#allExited()) void this.#finish();
    });
  }
}
