/**
 * Running `cos-admin` in tests. runCli and cliJson run a command in this process (src/run.ts) with
 * exactly the environment and working directory given and their own stdout and stderr: no process
 * start, no build, nothing shared between runs. spawnCli and startServe run it as a child process,
 * for what only a process shows (exit status, signals, what reaches the real stdout, `serve`): by
 * default the built bin (packages/cli/dist/main.js, the file the package installs, shebang and
 * all) after an incremental build once per run (ensureBuilt), as a child then starts in a third
 * of the time tsx needs; COS_CLI_TEST_FROM=source runs the TypeScript sources through tsx instead.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { markBuilt } from '../../../../scripts/cos-admin/stale.mjs';
import { bundleStaleness } from '../../scripts/bundle-inversify.mjs';
import { CONFIG_TABLE } from '../../src/config.js';
import { runCli as runInProcess } from '../../src/run.js';

export const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
export const MAIN_SOURCE = join(ROOT, 'packages/cli/src/main.ts');
export const MAIN_DIST = join(ROOT, 'packages/cli/dist/main.js');
const TSX_LOADER = import.meta.resolve('tsx');
const FROM_SOURCE = process.env['COS_CLI_TEST_FROM'] === 'source';

let built: Promise<void> | undefined;

/**
 * Builds packages/cli (and what it references) once per test process, unless running from source:
 * `tsc -b packages/cli`, then the inversify bundle the built CLI loads (made only when missing or
 * stale: scripts/bundle-inversify.mjs). Test processes side by side (mocha --parallel workers, two
 * suites) take turns through a lock directory, so no two builds write dist at once; a later one
 * finds everything up to date.
 */
export function ensureBuilt(): Promise<void> {
  if (FROM_SOURCE) return Promise.resolve();
  const run = (what: string, args: string[]): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      execFile(process.execPath, args, { cwd: ROOT }, (error, stdout, stderr) => {
        if (error) reject(new Error(`${what} failed:\n${stdout}${stderr}`));
        else resolve();
      });
    });
  built ??= withBuildLock(async () => {
    await run('tsc -b packages/cli', [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', 'packages/cli']);
    markBuilt(ROOT); // as the launcher does: its staleness check then agrees with this build
    if (bundleStaleness() !== null) await run('bundle-inversify', [join(ROOT, 'packages/cli/scripts/bundle-inversify.mjs')]);
  });
  return built;
}

/** A build older than this holding the lock has died: its lock is taken over. */
const STALE_BUILD_LOCK_MS = 300_000;

async function withBuildLock(work: () => Promise<void>): Promise<void> {
  const lock = join(tmpdir(), `cos-cli-build-${createHash('sha256').update(ROOT).digest('hex').slice(0, 16)}.lock`);
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      try {
        if (Date.now() - statSync(lock).mtimeMs > STALE_BUILD_LOCK_MS) rmSync(lock, { recursive: true, force: true });
      } catch {
        // released meanwhile
      }
      await sleep(100);
    }
  }
  try {
    await work();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Every configuration variable (the one table, config.ts): a child starts without any of them. */
export const CONFIG_VARIABLES: readonly string[] = CONFIG_TABLE.map((r) => r.variable);

export type Env = Record<string, string>;

/** The parent's environment without any service configuration, plus `env`. */
export function childEnv(env: Env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...process.env };
  for (const v of CONFIG_VARIABLES) delete out[v];
  delete out['NODE_OPTIONS'];
  return { ...out, ...env };
}

export function nodeArgs(args: readonly string[]): string[] {
  return FROM_SOURCE ? ['--import', TSX_LOADER, '--conditions=source', MAIN_SOURCE, ...args] : [MAIN_DIST, ...args];
}

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function tempDir(prefix = 'cos-cli-'): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A stream that keeps what is written to it as text. */
class Captured extends Writable {
  text = '';
  constructor() {
    super({ decodeStrings: false, highWaterMark: 1 << 20 });
  }
  override _write(chunk: string | Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    done();
  }
}

/**
 * Runs one command to completion in this process, with `env` as its whole environment (nothing
 * of process.env) and `cwd` as its working directory (its `.env`, relative paths).
 */
export async function runCli(args: readonly string[], env: Env, cwd: string): Promise<CliResult> {
  const stdout = new Captured();
  const stderr = new Captured();
  const code = await runInProcess(args, { env: { ...env }, cwd, stdout, stderr });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** Runs one command to completion as a child process (the built bin unless COS_CLI_TEST_FROM=source; call ensureBuilt first). */
export function spawnCli(args: readonly string[], env: Env, cwd: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, nodeArgs(args), { cwd, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs a command that must succeed with --json (in this process) and returns its parsed stdout (all of it). */
export async function cliJson<T = any>(args: readonly string[], env: Env, cwd: string): Promise<T> {
  const r = await runCli([...args, '--json'], env, cwd);
  if (r.code !== 0) throw new Error(`cos-admin ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

/** A key record as `cos-admin key issue|roll|list --json` prints it (`key` only when just issued or rolled). */
export interface KeyView {
  id: string;
  key?: string;
  label: string;
  status: string;
  expires_at: string | null;
  last_used_at: string | null;
  rolled_from: string | null;
  scopes: string[];
  created_by_key_id: string | null;
}

/** A `serve` child process and what it printed. */
export interface ServeProcess {
  readonly child: ChildProcess;
  /** Everything printed on stdout so far. */
  stdout(): string;
  stderr(): string;
  /** Parsed JSON log lines on stdout so far. */
  logLines(): Record<string, unknown>[];
  /** Resolves with the start-up log line once the server listens; rejects if the process exits first. */
  listening(timeoutMs?: number): Promise<{ port: number; url: string; line: Record<string, unknown> }>;
  /** Resolves with the exit code once the process has exited. */
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL if still running (cleanup). */
  kill(): void;
}

export interface StartServeOptions {
  /** Run under `ulimit -n <descriptorLimit>` (bash execs node, so the child is node itself). */
  readonly descriptorLimit?: number;
}

export function startServe(args: readonly string[], env: Env, cwd: string, options: StartServeOptions = {}): ServeProcess {
  const argv = nodeArgs(['serve', ...args]);
  const spawnOptions = { cwd, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'] };
  const child =
    options.descriptorLimit === undefined
      ? spawn(process.execPath, argv, spawnOptions)
      : spawn('bash', ['-c', `ulimit -n ${options.descriptorLimit} && exec "$0" "$@"`, process.execPath, ...argv], spawnOptions);
  let out = '';
  let err = '';
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exitWaiters: ((e: { code: number | null; signal: NodeJS.Signals | null }) => void)[] = [];
  const changeWaiters: (() => void)[] = [];
  const notify = (): void => {
    for (const w of changeWaiters.splice(0)) w();
  };
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    notify();
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d;
    notify();
  });
  child.on('exit', (code, signal) => {
    exit = { code, signal };
    for (const w of exitWaiters.splice(0)) w(exit);
    notify();
  });
  const logLines = (): Record<string, unknown>[] => jsonLines(out);
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    logLines,
    // Resolves on the listening line and fails at once when serve exits: the bound only catches a
    // start that hangs, so it is far above a start's time on a loaded machine (past 15 s seen).
    listening(timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`serve did not start in ${timeoutMs} ms:\n${out}\n${err}`)), timeoutMs);
        const check = (): void => {
          const line = logLines().find((l) => typeof l['port'] === 'number' && typeof l['address'] === 'string');
          if (line !== undefined) {
            clearTimeout(timer);
            resolve({ port: line['port'] as number, url: line['address'] as string, line });
          } else if (exit !== undefined) {
            clearTimeout(timer);
            reject(new Error(`serve exited (${exit.code ?? exit.signal}) before listening:\n${out}\n${err}`));
          } else {
            changeWaiters.push(check);
          }
        };
        check();
      });
    },
    exited() {
      return exit !== undefined ? Promise.resolve(exit) : new Promise((resolve) => exitWaiters.push(resolve));
    },
    kill() {
      if (exit === undefined) child.kill('SIGKILL');
    },
  };
}

/** The JSON lines (pino's log) of a process's output; other lines are skipped. */
export function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        return {};
      }
    });
}

/** The raw keys printed on stdout (bootstrap, key issue). */
export function printedKeys(text: string): string[] {
  return text.match(/svc_(?:live|test)_[A-Za-z0-9]{48}/g) ?? [];
}
