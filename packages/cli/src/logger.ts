/**
 * pino, adapted to core's Logger port. The server logs JSON lines on stdout (contract); operator
 * commands log on stderr so that stdout carries only their output (`--json`).
 */
import { pino, type Logger as PinoLogger } from 'pino';
import type { Logger } from '@cos/core';
import type { LogLevel } from './config.js';

export interface CosLogger extends Logger {
  /** The underlying pino instance (child loggers, level changes). */
  readonly pino: PinoLogger;
  /** Writes out anything buffered; call before exiting. */
  flush(): void;
}

export interface CreateLoggerOptions {
  readonly level: LogLevel;
  /** 1 = stdout (server), 2 = stderr (operator commands). */
  readonly fd?: 1 | 2;
  /** Synchronous writes: nothing lost on exit (operator commands); the server buffers. */
  readonly sync?: boolean;
  readonly base?: Record<string, unknown>;
}

export function createLogger(options: CreateLoggerOptions): CosLogger {
  const destination = pino.destination({ dest: options.fd ?? 1, sync: options.sync ?? false, minLength: 0 });
  const p = pino(
    {
      level: options.level,
      base: { service: 'cos', ...options.base },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
  return {
    pino: p,
    debug: (fields, message) => p.debug(fields, message),
    info: (fields, message) => p.info(fields, message),
    warn: (fields, message) => p.warn(fields, message),
    error: (fields, message) => p.error(fields, message),
    // pino's own check: follows later level changes on `pino` too.
    isLevelEnabled: (level) => p.isLevelEnabled(level),
    flush: () => {
      try {
        destination.flushSync();
      } catch {
        // not ready yet or already closed: nothing buffered that can still be written
      }
    },
  };
}

