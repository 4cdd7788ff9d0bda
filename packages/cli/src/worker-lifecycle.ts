/**
 * One `serve` worker from start to exit (the primary's side is supervisor.ts). start(): the Redis
 * target checked, the container built, the store made ready, the serving components resolved as
 * one (container.ts, ServeComponents), the operations questions answered, the API listening, the
 * background workers started and the primary told. The process then lives until the primary asks
 * it to stop (or SIGTERM/SIGINT): it drains in-flight requests, closes the container and exits.
 */
import { getHeapStatistics } from 'node:v8';
import type { Core } from '@cos/core';
import type { AppConfig } from './config.js';
import { buildContainer, closeContainer, CLI_TOKENS as T, type ServeComponents, type ServiceContainer } from './container.js';
import { defaultMaxConnections, softDescriptorLimit } from './descriptors.js';
import { CliError, describeError } from './errors.js';
import { lifecycle } from './lifecycle.js';
import { createLogger, type CosLogger } from './logger.js';
import { routeConsoleTo } from './console.js';
import { checkRedisAtStart, type RedisStartCheck } from './redis-start.js';
import { makeStoreReady } from './runtime.js';
import { listen, SHUTDOWN_GRACE_MS, type RunningServer } from './server.js';
import { firstWorkerOfStart, onPrimaryMessage, tellPrimary, workerOpsUrl, workerSlot, type WorkerInfo } from './workers.js';

/** How long the last log lines may take to reach stdout before the process exits without them. */
const LOG_CLOSE_MS = 1_000;
/** Beyond the grace period: closing the pools and the log (each bounded on its own). */
const SHUTDOWN_CLOSE_MS = 3_000;

export interface WorkerOptions {
  readonly config: AppConfig;
  readonly port: number;
  /** Run by the first worker of a start once its store is ready (`--bootstrap`); null: none. */
  readonly bootstrap: ((core: Core, logger: CosLogger) => Promise<void>) | null;
}

type StopSignal = NodeJS.Signals | 'primary' | 'second';

export class WorkerLifecycle {
  readonly #config: AppConfig;
  readonly #logger: CosLogger;
  #draining = false;
  #signals = 0;

  constructor(private readonly options: WorkerOptions) {
    this.#config = options.config;
    this.#logger = createLogger({ level: this.#config.logLevel, fd: 1, base: { worker: workerSlot(), pid: process.pid } });
    routeConsoleTo(this.#logger);
  }

  /** Resolves once the server listens and the primary has been told; a failure closes what was opened. */
  async start(): Promise<void> {
    const logger = this.#logger;
    // Before anything connects: a Redis target of the wrong kind stops the start with one line.
    const redisStart = await checkRedisAtStart(this.#config, logger).catch(async (e: unknown) => {
      await logger.close(LOG_CLOSE_MS);
      throw e;
    });
    const container = await buildContainer(this.#config, { logger });
    let listening: { server: RunningServer; serving: ServeComponents; info: WorkerInfo };
    try {
      listening = await this.#listen(container, redisStart);
    } catch (e) {
      redisStart.stop();
      await closeContainer(container).catch(() => undefined);
      await logger.close(LOG_CLOSE_MS);
      throw e;
    }
    const { server, serving, info } = listening;
    for (const worker of serving.workers) worker.start();
    // Stopped when the container closes, after the drain: the last requests' key uses are written.
    serving.core.keyUsage.start();
    lifecycle.daemon = true;
    // Handlers first, then the start-up line: whoever reads that line may signal at once.
    const stop = (signal: StopSignal, relayed?: NodeJS.Signals): void => this.#shutdown(signal, relayed, { container, server, serving, redisStart });
    this.#stop = stop;
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    // SIGHUP: the secret-scanning key file again (rotation without a restart); a bad file keeps the old keys.
    process.on('SIGHUP', () => this.#reloadScannerKeys(serving));
    // The start-up line once the primary has counted this worker (its /readyz then answers for it).
    await tellPrimary({ type: 'ready', info });
    const config = this.#config;
    logger.info(
      {
        ...info,
        secret_scanning: config.secretScanningPublicKeys === null && config.secretScanningKeysUrl === null ? 'off' : 'on',
        // The id of the key new webhook secrets are encrypted under (never the key), or "clear".
        webhook_secrets: config.webhookSecrets.currentKeyId ?? 'clear',
        ops: workerOpsUrl() ?? 'off',
      },
      `cos listening on ${server.url}`,
    );
  }

  /** The primary's stop (and signals) before the server listens: nothing to drain yet. */
  #stop: (signal: StopSignal, relayed?: NodeJS.Signals) => void = () => undefined;

  /** Everything up to listening; returns what runs and the ready info the primary and the start-up line report. */
  async #listen(container: ServiceContainer, redisStart: RedisStartCheck): Promise<{ server: RunningServer; serving: ServeComponents; info: WorkerInfo }> {
    const config = this.#config;
    const logger = this.#logger;
    // Before anything connects: a key file that does not parse stops the start with one line.
    container.get(T.ScannerKeys);
    const store = container.get(T.SqlStore);
    const applied = await makeStoreReady(store);
    if (applied.length > 0) logger.info({ store: store.dialect, migrations: applied }, 'applied pending migrations');
    const serving = await container.getAsync(T.Serve);
    // Only the first worker of a start bootstraps (and, on SQLite, migrates first: the others start after it).
    if (this.options.bootstrap !== null && firstWorkerOfStart()) await this.options.bootstrap(serving.core, logger);
    // The programme's published key list, fetched before the API listens (a failure is logged once
    // and the alerts are refused until a fetch succeeds: at the refresh, or on an alert's unknown key).
    await serving.scannerKeyUrl?.start();
    // Connection limits (descriptors.ts): the cap stays below the descriptor limit, with room for the pools and webhooks.
    const descriptorLimit = softDescriptorLimit();
    const maxConnections = config.maxConnections ?? defaultMaxConnections(descriptorLimit);
    if (descriptorLimit !== null && maxConnections >= descriptorLimit) {
      logger.warn({ max_connections: maxConnections, descriptor_limit: descriptorLimit }, 'MAX_CONNECTIONS is not below the descriptor limit (ulimit -n): at the limit new connections are reset');
    }
    // The operations listener is the primary's: it asks this worker for its probe and its metrics.
    const prometheus = serving.prometheus;
    onPrimaryMessage({
      health: async () => (this.#draining ? 'draining' : (redisStart.notReady() ?? ((await serving.core.health.check()).status === 'ok' ? null : 'store unavailable'))),
      metrics: async () => (prometheus === null ? [] : prometheus.registry.getMetricsAsJSON()),
      stop: (force, signal) => this.#stop(force ? 'second' : 'primary', signal),
    });
    const port = this.options.port;
    const server = await listen(serving.app, config.host, port, logger, { maxConnections, headersTimeoutMs: config.headersTimeoutMs, requestTimeoutMs: config.requestTimeoutMs }).catch(
      (e: unknown) => {
        const code = (e as { code?: string }).code;
        throw new CliError(`cannot listen on ${config.host}:${port}: ${code === 'EADDRINUSE' ? 'the address is already in use' : describeError(e)}`);
      },
    );
    const info: WorkerInfo = {
      address: server.url,
      host: server.host,
      port: server.port,
      store: store.dialect,
      limiter: serving.limiterKind,
      max_connections: maxConnections,
      // V8's heap limit of this worker (the old space serve derived from MEMORY_LIMIT_MB, plus the young generation).
      heap_limit_mb: Math.round(getHeapStatistics().heap_size_limit / 2 ** 20),
      version: serving.version,
    };
    return { server, serving, info };
  }

  /**
   * A signal reaches a worker directly (a terminal's Ctrl-C goes to the whole process group) and
   * from the primary as a message: the primary's first stop starts the drain once, its second
   * ('second') cuts it short, as a second direct signal does.
   */
  #shutdown(
    signal: StopSignal,
    relayed: NodeJS.Signals | undefined,
    running: { readonly container: ServiceContainer; readonly server: RunningServer; readonly serving: ServeComponents; readonly redisStart: RedisStartCheck },
  ): void {
    const logger = this.#logger;
    if (signal === 'primary' && this.#signals > 0) return;
    // The primary's second stop can overtake its first (it closes its log in between): drain first.
    if (signal === 'second' && this.#signals === 0) this.#shutdown('primary', undefined, running);
    this.#signals = signal === 'second' ? Math.max(this.#signals, 1) + 1 : this.#signals + 1;
    if (this.#signals > 1) {
      logger.warn({ signal }, 'second signal: closing every connection now');
      running.server.destroyAll();
      return;
    }
    logger.info({ signal: relayed ?? signal, graceMs: SHUTDOWN_GRACE_MS }, 'shutting down: no new connections, finishing in-flight requests');
    // Not ready from now on (the primary's readyz answers 503).
    this.#draining = true;
    // Whatever hangs (a pool that does not close, stdout that takes nothing), the process ends.
    setTimeout(() => process.exit(1), SHUTDOWN_GRACE_MS + SHUTDOWN_CLOSE_MS).unref();
    void (async () => {
      let exitCode = 0;
      try {
        running.redisStart.stop();
        // The workers stop claiming while the requests in flight finish (their close is idempotent).
        const [{ forced }] = await Promise.all([running.server.stop(SHUTDOWN_GRACE_MS), ...running.serving.workers.map((w) => w.stop())]);
        // The container closes the rest, dependants first: the last_used_at of the requests just
        // finished (the core's KeyUsage), the instance's registration, then the Redis connection and the pool.
        await closeContainer(running.container);
        logger.info({ forced }, 'shut down: pools closed');
      } catch (e) {
        logger.error({ err: describeError(e) }, 'error while shutting down');
        exitCode = 1;
      }
      // Bounded: stdout may be a pipe whose reader is gone or stalled.
      await logger.close(LOG_CLOSE_MS);
      process.exit(exitCode);
    })();
  }

  #reloadScannerKeys(serving: ServeComponents): void {
    const logger = this.#logger;
    const scannerKeys = serving.scannerKeys;
    if (scannerKeys === null) {
      logger.info({}, 'SIGHUP: no SECRET_SCANNING_PUBLIC_KEYS to reload');
      return;
    }
    try {
      const keys = scannerKeys.reload();
      logger.info({ path: scannerKeys.path, keys: keys.size }, 'SIGHUP: secret-scanning public keys reloaded');
    } catch (e) {
      logger.error({ err: describeError(e) }, 'SIGHUP: secret-scanning public keys not reloaded; the previous keys stay in use');
    }
  }
}
