// What every bench script starts with: its command line, a log whose lines carry the seconds since
// the start, the built CLI it measures, a scratch directory, and the service processes it starts
// (stopped on SIGINT and at the end) with the cleanups it registers (run last-in first-out).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL } from './infra.mjs';
import { startBaseline, startService } from './procs.mjs';
import { BUNDLE, CLI_DIR } from '../../packages/cli/scripts/bundle-inversify.mjs';
import { CLI_MAIN, ROOT } from './resolve.mjs';

/**
 * The script's options: --quick, --write and --keep for every script, plus `options` (parseArgs
 * form). `pnpm bench -- --quick` hands the script a literal `--` first: it is dropped.
 */
export function benchArgs(options) {
  const argv = process.argv.slice(2).filter((a) => a !== '--');
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      write: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      ...options,
    },
    allowPositionals: false,
  });
  return { argv, opt: values };
}

/** Postgres and Redis of the run: TEST_DATABASE_URL and TEST_REDIS_URL, else the local defaults. */
export function infraUrls() {
  return {
    databaseUrl: process.env.TEST_DATABASE_URL || DEFAULT_DATABASE_URL,
    redisUrl: process.env.TEST_REDIS_URL || DEFAULT_REDIS_URL,
  };
}

/**
 * Starts a run named `name` (the prefix of its messages): exits with status 2 when the built CLI
 * (or its inversify bundle) is missing (`buildHint` says how to build), makes the scratch directory `cos-<name>-*` and stops
 * every running process on SIGINT.
 */
export function benchSession(name, buildHint) {
  const started = Date.now();
  const log = (line = '') => process.stdout.write(`${line}\n`);
  const step = (line) => log(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}`);
  // The built CLI and the inversify bundle it loads (`tsc -b` alone does not make the bundle).
  for (const built of [CLI_MAIN, path.join(CLI_DIR, BUNDLE)]) {
    if (!existsSync(built)) {
      console.error(`${name}: ${path.relative(ROOT, built)} is missing; ${buildHint}.`);
      process.exit(2);
    }
  }
  const work = mkdtempSync(path.join(os.tmpdir(), `cos-${name}-`));
  const running = new Set();
  const cleanups = [];

  const track = async (starting) => {
    const p = await starting;
    running.add(p);
    return p;
  };
  async function stop(p) {
    if (!p) return;
    running.delete(p);
    await p.stop();
  }
  async function stopAll() {
    for (const p of [...running]) await stop(p).catch(() => {});
  }
  process.on('SIGINT', async () => {
    log(`\n${name}: interrupted, stopping children`);
    await stopAll();
    process.exit(130);
  });

  return {
    started,
    log,
    step,
    work,
    /** A service process (procs.mjs startService), stopped with the run. */
    start: (options) => track(startService(options)),
    /** The bare Koa baseline (procs.mjs startBaseline), stopped with the run. */
    startBaseline: (options) => track(startBaseline(options)),
    stop,
    /** Stops every process still running. */
    stopAll,
    /** Runs `cleanup` (async) when the run closes, before the ones registered earlier. */
    onClose: (cleanup) => cleanups.push(cleanup),
    /** Stops every process still running, then runs the cleanups, latest first. */
    async close() {
      await stopAll();
      for (const c of cleanups.splice(0).reverse()) await c().catch((e) => log(`cleanup: ${e.message}`));
    },
    /** Removes the scratch directory, or with `keep` says where it is. */
    removeWork(keep) {
      if (keep) log(`scratch directory kept: ${work}`);
      else rmSync(work, { recursive: true, force: true });
    },
  };
}
