import type { Command } from 'commander';
import { getHeapStatistics } from 'node:v8';
import { parseWorkers, workersMessage, type AppConfig } from '../config.js';
import { currentIo } from '../io.js';
import { CliError, describeError } from '../errors.js';
import { routeConsoleTo } from '../console.js';
import { emit } from '../output.js';
import { lifecycle } from '../lifecycle.js';
import { makeStoreReady, runConfig } from '../runtime.js';
import { SHUTDOWN_GRACE_MS } from '../server.js';
import { bootstrapText, bootstrapView } from './bootstrap.js';
import { jsonWanted, withJson } from './shared.js';

/** How long the last log lines may take to reach stdout before the process exits without them. */
const LOG_CLOSE_MS = 1_000;
/** Beyond the grace period: closing the pools and the log (each bounded on its own). */
const SHUTDOWN_CLOSE_MS = 3_000;
/** How often `serve` deletes expired Idempotency-Key answers (they expire after 24 h). */
const IDEMPOTENCY_SWEEP_INTERVAL_MS = 15 * 60_000;

interface ServeOptions {
  port?: string;
  bootstrap?: boolean;
  workers?: string;
}

function portOption(text: string | undefined, config: AppConfig): number {
  if (text === undefined) return config.port;
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= 0 && port <= 65535)) throw new CliError('--port must be an integer from 0 to 65535', { usage: true });
  return port;
}

function workersOption(text: string | undefined, config: AppConfig): { workers: number; from: string } {
  if (text === undefined) return { workers: config.workers, from: 'WORKERS' };
  const workers = parseWorkers(text);
  if (workers === null) throw new CliError(workersMessage('--workers'), { usage: true });
  return { workers, from: '--workers' };
}

/**
 * `serve`: a primary process that forks the workers (workers.ts), or, in a worker, the service
 * itself. Validates the command line and the configuration before anything is forked.
 */
async function serve(opts: ServeOptions, json: boolean): Promise<void> {
  const config = runConfig();
  const port = portOption(opts.port, config);
  const { default: cluster } = await import('node:cluster');
  if (cluster.isWorker) {
    try {
      return await serveWorker(opts, json, config, port);
    } catch (e) {
      // A worker lives by its channel to the primary (its listening socket is the primary's): one
      // that failed to start lets go of it, so it exits once main has reported the failure.
      process.channel?.unref();
      throw e;
    }
  }
  const { workers, from } = workersOption(opts.workers, config);
  // Each worker would keep its own in-process counter: N workers would allow N times the limits.
  if (workers > 1 && config.redisUrl === null) {
    throw new CliError(
      `${from === '--workers' ? `--workers ${workers}` : `WORKERS=${workers}`} needs REDIS_URL (or REDIS_CLUSTER_NODES): without it each worker counts rate limits on its own; set REDIS_URL or run one worker`,
      from === '--workers' ? { usage: true } : { code: 'CONFIG_ERROR' },
    );
  }
  // The server owns the process (signal handlers, exit): it cannot run inside another program.
  if (!currentIo().ownsProcess) throw new CliError('serve runs in a process of its own: start `cos-admin serve` as a command');
  const { runPrimary } = await import('../workers.js');
  await runPrimary({ config, workers });
}

/**
 * A worker: the composition root at work. Resolves once the server is listening and the primary has
 * been told; the process then lives until the primary asks it to stop (or SIGTERM/SIGINT), when it
 * drains in-flight requests, closes pools and exits 0.
 */
async function serveWorker(opts: ServeOptions, json: boolean, config: AppConfig, port: number): Promise<void> {
  const { workerSlot, firstWorkerOfStart, workerOpsUrl, onPrimaryMessage, tellPrimary } = await import('../workers.js');
  const slot = workerSlot();
  const { createLogger } = await import('../logger.js');
  const logger = createLogger({ level: config.logLevel, fd: 1, base: { worker: slot, pid: process.pid } });
  routeConsoleTo(logger);
  const { buildContainer, closeContainer, CLI_TOKENS: T } = await import('../container.js');
  const { listen } = await import('../server.js');
  // Before anything connects: a Redis target of the wrong kind stops the start with one line.
  const { checkRedisAtStart } = await import('../redis-start.js');
  const redisStart = await checkRedisAtStart(config, logger).catch(async (e: unknown) => {
    await logger.close(LOG_CLOSE_MS);
    throw e;
  });
  const container = await buildContainer(config, { logger });
  let running: Awaited<ReturnType<typeof listen>> | undefined;
  let draining = false;
  let shutdown: (signal: NodeJS.Signals | 'primary' | 'second', relayed?: NodeJS.Signals) => void = () => undefined;
  let delivery: import('@cos/core').WebhookDelivery | null = null;
  let retention: import('@cos/core').NotificationRetention | undefined;
  let usageRetention: import('@cos/core').UsageRetention | undefined;
  let storeKind = 'unknown';
  let maxConnections = 0;
  try {
    // Before anything connects: a key file that does not parse stops the start with one line.
    container.get(T.ScannerKeys);
    const store = container.get(T.SqlStore);
    storeKind = store.dialect;
    const applied = await makeStoreReady(store);
    if (applied.length > 0) logger.info({ store: store.dialect, migrations: applied }, 'applied pending migrations');
    const core = container.get(T.Core);
    retention = container.get(T.NotificationRetention);
    usageRetention = container.get(T.UsageRetention);
    // Only the first worker of a start bootstraps (and, on SQLite, migrates first: the others start after it).
    if (opts.bootstrap === true && firstWorkerOfStart()) {
      const result = await core.bootstrap.run();
      if (result.created) emit(json, bootstrapView(result, core), () => bootstrapText(result));
      else logger.info({ organisation_id: result.organisation.id }, 'a system organisation exists: bootstrap skipped');
    }
    // The programme's published key list, fetched before the API listens (a failure is logged once
    // and the alerts are refused until a fetch succeeds: at the refresh, or on an alert's unknown key).
    await container.get(T.ScannerKeyUrl)?.start();
    const app = await container.getAsync(T.HttpApp);
    delivery = container.get(T.WebhookDelivery);
    const cannotListen = (host: string, p: number, variable: string) => (e: unknown) => {
      const code = (e as { code?: string }).code;
      const why = code === 'EADDRINUSE' ? 'the address is already in use' : describeError(e);
      throw new CliError(`cannot listen on ${host}:${p}${variable}: ${why}`);
    };
    // The operations listener first: its probes answer (readyz: 503 "starting") while the API comes up.
    // Connection limits (descriptors.ts): the cap stays below the descriptor limit, with room for the pools and webhooks.
    const { defaultMaxConnections, softDescriptorLimit } = await import('../descriptors.js');
    const descriptorLimit = softDescriptorLimit();
    maxConnections = config.maxConnections ?? defaultMaxConnections(descriptorLimit);
    if (descriptorLimit !== null && maxConnections >= descriptorLimit) {
      logger.warn({ max_connections: maxConnections, descriptor_limit: descriptorLimit }, 'MAX_CONNECTIONS is not below the descriptor limit (ulimit -n): at the limit new connections are reset');
    }
    const timeouts = { headersTimeoutMs: config.headersTimeoutMs, requestTimeoutMs: config.requestTimeoutMs };
    // The operations listener is the primary's: it asks this worker for its probe and its metrics.
    const prometheus = container.get(T.PrometheusMetrics);
    onPrimaryMessage({
      health: async () => (draining ? 'draining' : (redisStart.notReady() ?? ((await core.health.check()).status === 'ok' ? null : 'store unavailable'))),
      metrics: async () => (prometheus === null ? [] : prometheus.registry.getMetricsAsJSON()),
      stop: (force, signal) => shutdown(force ? 'second' : 'primary', signal),
    });
    running = await listen(app, config.host, port, logger, { maxConnections, ...timeouts }).catch(cannotListen(config.host, port, ''));
  } catch (e) {
    redisStart.stop();
    await closeContainer(container).catch(() => undefined);
    await logger.close(LOG_CLOSE_MS);
    throw e;
  }

  const server = running;
  const sender = delivery;
  const purger = retention!;
  const usagePurger = usageRetention!;
  sender?.start();
  container.get(T.Core).keyUsage.start();
  // Expired Idempotency-Key answers are deleted at start and then every IDEMPOTENCY_SWEEP_INTERVAL_MS
  // (by every instance: a sweep is one indexed DELETE, harmless when another just ran it).
  const idempotency = container.get(T.Core).idempotency;
  const sweepIdempotency = (): void => {
    idempotency.sweep().then(
      (swept) => {
        if (swept > 0) logger.info({ swept }, 'expired idempotency keys deleted');
      },
      (e: unknown) => logger.warn({ err: describeError(e) }, 'idempotency key sweep failed; the next one retries'),
    );
  };
  sweepIdempotency();
  const idempotencySweeper = setInterval(sweepIdempotency, IDEMPOTENCY_SWEEP_INTERVAL_MS);
  idempotencySweeper.unref();
  purger.start();
  usagePurger.start();
  lifecycle.daemon = true;
  // A signal reaches a worker directly (a terminal's Ctrl-C goes to the whole process group) and
  // from the primary as a message: the primary's first stop starts the drain once, its second
  // ('second') cuts it short, as a second direct signal does.
  let signals = 0;
  shutdown = (signal: NodeJS.Signals | 'primary' | 'second', relayed?: NodeJS.Signals): void => {
    if (signal === 'primary' && signals > 0) return;
    // The primary's second stop can overtake its first (it closes its log in between): drain first.
    if (signal === 'second' && signals === 0) shutdown('primary');
    signals = signal === 'second' ? Math.max(signals, 1) + 1 : signals + 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: closing every connection now');
      server.destroyAll();
      return;
    }
    logger.info({ signal: relayed ?? signal, graceMs: SHUTDOWN_GRACE_MS }, 'shutting down: no new connections, finishing in-flight requests');
    // Not ready from now on (the primary's readyz answers 503).
    draining = true;
    // Whatever hangs (a pool that does not close, stdout that takes nothing), the process ends.
    setTimeout(() => process.exit(1), SHUTDOWN_GRACE_MS + SHUTDOWN_CLOSE_MS).unref();
    void (async () => {
      let exitCode = 0;
      try {
        clearInterval(idempotencySweeper);
        redisStart.stop();
        // The workers stop claiming while the requests in flight finish (their close is idempotent).
        const [{ forced }] = await Promise.all([server.stop(SHUTDOWN_GRACE_MS), sender?.stop(), purger.stop(), usagePurger.stop()]);
        // The container closes the rest, dependants first: the last_used_at of the requests just
        // finished (the core's KeyUsage), the instance's registration, then the Redis connection and the pool.
        await closeContainer(container);
        logger.info({ forced }, 'shut down: pools closed');
      } catch (e) {
        logger.error({ err: describeError(e) }, 'error while shutting down');
        exitCode = 1;
      }
      // Bounded: stdout may be a pipe whose reader is gone or stalled.
      await logger.close(LOG_CLOSE_MS);
      process.exit(exitCode);
    })();
  };
  // Handlers first, then the start-up line: whoever reads that line may signal at once.
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  const scannerKeys = container.get(T.ScannerKeys);
  // SIGHUP: the secret-scanning key file again (rotation without a restart); a bad file keeps the old keys.
  process.on('SIGHUP', () => {
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
  });
  const heapLimitMb = Math.round(getHeapStatistics().heap_size_limit / 2 ** 20);
  // The start-up line once the primary has counted this worker (its /readyz then answers for it).
  await tellPrimary({
    type: 'ready',
    info: {
      address: server.url,
      host: server.host,
      port: server.port,
      store: storeKind,
      limiter: container.get(T.Limiter).kind,
      max_connections: maxConnections,
      heap_limit_mb: heapLimitMb,
      version: container.get(T.ServiceVersion),
    },
  });
  logger.info(
    {
      address: server.url,
      host: server.host,
      port: server.port,
      store: storeKind,
      limiter: container.get(T.Limiter).kind,
      secret_scanning: config.secretScanningPublicKeys === null && config.secretScanningKeysUrl === null ? 'off' : 'on',
      // The id of the key new webhook secrets are encrypted under (never the key), or "clear".
      webhook_secrets: config.webhookSecrets.currentKeyId ?? 'clear',
      ops: workerOpsUrl() ?? 'off',
      max_connections: maxConnections,
      // V8's heap limit of this worker (the old space serve derived from MEMORY_LIMIT_MB, plus the young generation).
      heap_limit_mb: heapLimitMb,
      version: container.get(T.ServiceVersion),
    },
    `cos listening on ${server.url}`,
  );
}

export function registerServe(program: Command): void {
  withJson(
    program
      .command('serve')
      .description('run the HTTP server (SQLite migrates on start; Postgres must be migrated with `cos-admin migrate`)')
      .option('--port <port>', 'listen port, overrides PORT (0: any free port)')
      .option('--bootstrap', 'run bootstrap first when no system organisation exists (prints the platform key once)')
      .option('--workers <n>', 'worker processes behind the one port (a number, or auto: the cores available), overrides WORKERS')
      .action(async (opts: ServeOptions, cmd: Command) => {
        await serve(opts, jsonWanted(cmd));
      }),
  );
}
