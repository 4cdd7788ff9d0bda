import type { Command } from 'commander';
import type { Core, Logger } from '@cos/core';
import { parseWorkers, workersMessage, type AppConfig } from '../config.js';
import { currentIo } from '../io.js';
import { CliError } from '../errors.js';
import { emit } from '../output.js';
import { runConfig } from '../runtime.js';
import { bootstrapText, bootstrapView } from './bootstrap.js';
import { jsonWanted, withJson } from './shared.js';

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
 * `serve`: a primary process that forks the workers (supervisor.ts), or, in a worker, the service
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
  const { Supervisor } = await import('../supervisor.js');
  await new Supervisor({ config, workers }).run();
}

/**
 * A worker: the composition root at work (worker-lifecycle.ts). Resolves once the server is
 * listening and the primary has been told; the process then lives until the primary asks it to
 * stop (or SIGTERM/SIGINT), when it drains in-flight requests, closes pools and exits 0.
 */
async function serveWorker(opts: ServeOptions, json: boolean, config: AppConfig, port: number): Promise<void> {
  const { WorkerLifecycle } = await import('../worker-lifecycle.js');
  const bootstrap = async (core: Core, logger: Logger): Promise<void> => {
    const result = await core.bootstrap.run();
    if (result.created) emit(json, bootstrapView(result, core), () => bootstrapText(result));
    else logger.info({ organisation_id: result.organisation.id }, 'a system organisation exists: bootstrap skipped');
  };
  await new WorkerLifecycle({ config, port, bootstrap: opts.bootstrap === true ? bootstrap : null }).start();
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
