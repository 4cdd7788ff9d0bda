#!/usr/bin/env node
/**
 * cos-admin: the operator's tool and the way the service runs (`cos-admin serve`).
 * Heavy modules (Koa, Redis, the container) are imported inside the commands that need them.
 */
import 'reflect-metadata';
import { describeError } from './errors.js';
import { buildProgram } from './program.js';
import { lifecycle } from './lifecycle.js';

const argv = process.argv.slice(2);
// `pnpm cos-admin -- org list` hands the separator through: it is not an argument.
if (argv[0] === '--') argv.shift();

try {
  await buildProgram().parseAsync(argv, { from: 'user' });
} catch (e) {
  process.stderr.write(`cos-admin: ${describeError(e)}\n`);
  process.exitCode = 1;
}

if (!lifecycle.daemon) {
  // Everything is closed by now; should a handle linger anyway, do not hang the operator's shell.
  setTimeout(() => process.exit(), 2000).unref();
}
