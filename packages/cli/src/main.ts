#!/usr/bin/env node
/**
 * cos-admin: the operator's tool and the way the service runs (`cos-admin serve`).
 * Heavy modules (Koa, Redis, the container) are imported inside the commands that need them.
 */
import 'reflect-metadata';
import { EXIT_USAGE, reportFailure } from './errors.js';
import { buildProgram } from './program.js';
import { lifecycle } from './lifecycle.js';

const argv = process.argv.slice(2);
// `pnpm cos-admin -- org list` hands the separator through: it is not an argument.
if (argv[0] === '--') argv.shift();

// --json anywhere among the options (not after a `--`) asks for JSON errors too, even when the
// command line itself is wrong and commander never got to parse it.
const separator = argv.indexOf('--');
const json = (separator === -1 ? argv : argv.slice(0, separator)).includes('--json');

try {
  await buildProgram().parseAsync(argv, { from: 'user' });
} catch (e) {
  const code = (e as { code?: unknown }).code;
  // --help and --version end the parse with commander's "exit 0" signal: not a failure.
  if ((e as { exitCode?: unknown }).exitCode === 0 && typeof code === 'string' && code.startsWith('commander.')) {
    process.exitCode = 0;
  } else if (code === 'commander.help') {
    // A command group without its subcommand (`cos-admin org`): commander printed the group's help on stderr.
    process.exitCode = EXIT_USAGE;
  } else {
    process.exitCode = reportFailure(e, json);
  }
}

if (!lifecycle.daemon) {
  // Everything is closed by now; should a handle linger anyway, do not hang the operator's shell.
  setTimeout(() => process.exit(), 2000).unref();
}
