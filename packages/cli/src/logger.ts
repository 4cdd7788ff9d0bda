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
  /**
   * Writes out anything buffered, synchronously: for synchronous loggers (operator commands), where
   * nothing is ever buffered. Never call it on the server's asynchronous logger before exiting: a
   * synchronous flush into a pipe whose reader is gone (EPIPE) or full retries forever; use close().
   */
  flush(): void;
  /**
   * Writes out what is buffered and stops logging, within `timeoutMs` whatever stdout does (EPIPE,
   * a closed or full pipe, a write that never completes): resolves when done or when the time is up,
   * never rejects. After it nothing is written, and nothing is flushed at process exit either.
   */
  close(timeoutMs: number): Promise<void>;
}

export interface CreateLoggerOptions {
  readonly level: LogLevel;
  /** 1 = stdout (server), 2 = stderr (operator commands). */
  readonly fd?: 1 | 2;
  /** Synchronous writes: nothing lost on exit (operator commands); the server buffers. */
  readonly sync?: boolean;
  readonly base?: Record<string, unknown>;
  /** Writes into this stream instead of `fd` (a command run inside another program: that run's stderr). */
  readonly stream?: NodeJS.WritableStream;
}

function newPino(options: CreateLoggerOptions, destination: pino.DestinationStream): PinoLogger {
  return pino(
    {
      level: options.level,
      base: { service: 'cos', ...options.base },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}

function ported(p: PinoLogger, flush: () => void, close: (timeoutMs: number) => Promise<void>): CosLogger {
  return {
    pino: p,
    debug: (fields, message) => p.debug(fields, message),
    info: (fields, message) => p.info(fields, message),
    warn: (fields, message) => p.warn(fields, message),
    error: (fields, message) => p.error(fields, message),
    // pino's own check: follows later level changes on `pino` too.
    isLevelEnabled: (level) => p.isLevelEnabled(level),
    flush,
    close,
  };
}

export function createLogger(options: CreateLoggerOptions): CosLogger {
  if (options.stream !== undefined) {
    // The stream is the caller's: writes go straight into it, and closing only stops logging.
    const p = newPino(options, options.stream);
    return ported(p, () => undefined, () => {
      p.level = 'silent';
      return Promise.resolve();
    });
  }
  const destination = pino.destination({ dest: options.fd ?? 1, sync: options.sync ?? false, minLength: 0 });
  // A write error (EPIPE: the reader of stdout is gone) ends logging instead of crashing the process
  // or looping: the service keeps serving and shuts down on time without its log.
  let broken = false;
  let closed = false;
  destination.on('error', () => {
    broken = true;
  });
  const p = newPino(options, destination);
  return ported(
    p,
    () => {
      if (broken) return;
      try {
        destination.flushSync();
      } catch {
        // not ready yet or already closed: nothing buffered that can still be written
      }
    },
    (timeoutMs) =>
      new Promise<void>((resolve) => {
        let timer: NodeJS.Timeout | undefined;
        const done = (): void => {
          clearTimeout(timer);
          destination.off('close', done);
          destination.off('error', done);
          // Stopped for good: pino's exit hook then has nothing to flush synchronously (it would
          // retry forever on a broken or full pipe).
          p.level = 'silent';
          if (closed) return resolve();
          closed = true;
          try {
            destination.destroy();
          } catch {
            // already closed
          }
          resolve();
        };
        if (broken || closed) {
          done();
          return;
        }
        timer = setTimeout(done, timeoutMs);
        destination.once('close', done);
        destination.once('error', done);
        try {
          destination.end();
        } catch {
          done();
        }
      }),
  );
}

