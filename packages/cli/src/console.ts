/** Stray console output, routed into the structured log. */
import { formatWithOptions } from 'node:util';
import type { Logger } from '@cos/core';

/**
 * Libraries that print with console.* (knex logs pool errors with console.log) would break the
 * JSON-lines log on stdout and the `--json` output: route such output into the structured log.
 */
export function routeConsoleTo(logger: Logger): void {
  const toLog =
    (level: 'debug' | 'info' | 'warn' | 'error') =>
    (...args: unknown[]): void =>
      logger[level]({ source: 'console' }, formatWithOptions({ breakLength: Infinity }, ...args).replace(/\s*\n\s*/g, ' '));
  console.log = toLog('warn');
  console.info = toLog('info');
  console.debug = toLog('debug');
  console.warn = toLog('warn');
  console.error = toLog('error');
}
