/**
 * One `cos-admin` run, from the argument list to the exit status: what the binary does with
 * process.argv, and what a program (or a test) calls to run a command in its own process with its
 * own environment, working directory and output streams.
 */
import type { Writable } from 'node:stream';
import { wellFormedText } from '@cos/core';
import { EXIT_USAGE, reportFailure } from './errors.js';
import { currentIo, withIo, type CliIo } from './io.js';
import { buildProgram } from './program.js';

export interface RunCliOptions {
  /** The configuration's environment (default: process.env). Nothing else is read from process.env. */
  readonly env?: NodeJS.ProcessEnv;
  /** Where `.env` is read and relative paths resolve (default: process.cwd()). */
  readonly cwd?: string;
  readonly stdout?: Writable;
  readonly stderr?: Writable;
}

/**
 * Runs one command and resolves with its exit status (0 success, 2 usage, 1 any other failure); a
 * failure is reported on `stderr` as the binary reports it. With any option given the run does not
 * own the process: it leaves console.* alone and refuses `serve`, which needs a process of its own.
 */
export function runCli(argv: readonly string[], options: RunCliOptions = {}): Promise<number> {
  // The binary's own run is the process's io (currentIo's fallback) and no AsyncLocalStorage scope:
  // a scope entered once keeps Node's promise hooks on for the life of the process (Node 20), which
  // `serve` would pay on every request.
  if (Object.keys(options).length === 0) return run([...argv]);
  const io: CliIo = {
    // A copy: the .env file's values are added to it, and must not reach the caller's object.
    env: { ...(options.env ?? process.env) },
    cwd: options.cwd ?? process.cwd(),
    stdout: options.stdout ?? process.stdout,
    stderr: options.stderr ?? process.stderr,
    ownsProcess: false,
    state: {},
  };
  return withIo(io, () => run([...argv]));
}

async function run(given: string[]): Promise<number> {
  // Arguments are well-formed text (C-121): a lone surrogate (possible only from a caller in process;
  // the OS hands over bytes, decoded with U+FFFD for what is not UTF-8) becomes U+FFFD, so that what
  // is stored and hashed into the audit chain is what was validated. U+0000 is left to each value's
  // own check.
  const argv = given.map(wellFormedText);
  // `pnpm cos-admin -- org list` hands the separator through: it is not an argument.
  if (argv[0] === '--') argv.shift();
  // --json anywhere among the options (not after a `--`) asks for JSON errors too, even when the
  // command line itself is wrong and commander never got to parse it.
  const separator = argv.indexOf('--');
  const json = (separator === -1 ? argv : argv.slice(0, separator)).includes('--json');
  try {
    await buildProgram().parseAsync(argv, { from: 'user' });
    return currentIo().state.exitCode ?? 0;
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    // --help and --version end the parse with commander's "exit 0" signal: not a failure.
    if ((e as { exitCode?: unknown }).exitCode === 0 && typeof code === 'string' && code.startsWith('commander.')) return 0;
    // A command group without its subcommand (`cos-admin org`): commander printed the group's help on stderr.
    if (code === 'commander.help') return EXIT_USAGE;
    return reportFailure(e, json);
  }
}
