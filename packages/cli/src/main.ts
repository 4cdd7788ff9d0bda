#!/usr/bin/env node
/**
 * cos-admin: the operator's tool and the way the service runs (`cos-admin serve`).
 * Heavy modules (Koa, Redis, prom-client) are imported inside the commands that need them.
 */
import { lifecycle } from './lifecycle.js';
import { runCli } from './run.js';

process.exitCode = await runCli(process.argv.slice(2));

if (!lifecycle.daemon) {
  // Everything is closed by now; should a handle linger anyway, do not hang the operator's shell.
  setTimeout(() => process.exit(), 2000).unref();
}
