/**
 * Where one `cos-admin` run reads its configuration and writes its output. The binary runs with
 * the process's own (environment, working directory, stdout, stderr); runCli (run.ts) runs a
 * command inside the process with its own, so that runs side by side never see each other's
 * configuration, output, actor or exit status. Commands reach the current run's through
 * currentIo(): an AsyncLocalStorage scope, so nothing of one run is left in module state.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { isAbsolute, resolve } from 'node:path';
import type { Writable } from 'node:stream';

export interface CliIo {
  /** The environment the configuration is read from (and `.env` values are added to). */
  readonly env: NodeJS.ProcessEnv;
  /** The working directory: `.env` is read here, and relative paths (SQLite files, --out, --file) resolve against it. */
  readonly cwd: string;
  readonly stdout: Writable;
  readonly stderr: Writable;
  /**
   * True for the binary: the run owns the process, so it may route stray console output into its
   * log and run `serve` (signal handlers, process exit). False for a run inside another program.
   */
  readonly ownsProcess: boolean;
  /**
   * Set while the run goes: `--actor` as given, the exit status a command asked for without failing,
   * and how the command's operator wrote request fields whose flag is not the usual one (errors.ts).
   */
  state: { actor?: string; exitCode?: number; labels?: Readonly<Record<string, string>> };
}

const storage = new AsyncLocalStorage<CliIo>();

/** The process's own: used by the binary and whenever no run scope is active. */
function processIo(): CliIo {
  return { env: process.env, cwd: process.cwd(), stdout: process.stdout, stderr: process.stderr, ownsProcess: true, state: {} };
}

let fallback: CliIo | undefined;

/** The current run's io; outside any run, the process's own. */
export function currentIo(): CliIo {
  return storage.getStore() ?? (fallback ??= processIo());
}

/** Runs `work` with `io` as the current run's. */
export function withIo<T>(io: CliIo, work: () => Promise<T>): Promise<T> {
  return storage.run(io, work);
}

/** A path given on the command line, resolved against the run's working directory (as given when that is the process's). */
export function runPath(path: string): string {
  const { cwd } = currentIo();
  return isAbsolute(path) || cwd === process.cwd() ? path : resolve(cwd, path);
}
