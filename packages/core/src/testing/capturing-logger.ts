import type { Logger } from '../ports/logger.js';

export interface LogEntry {
  level: 'debug' | 'info' | 'warn' | 'error';
  fields: Record<string, unknown>;
  message: string;
}

/** A Logger that keeps every call in `entries` (fields are copied at call time). */
export class CapturingLogger implements Logger {
  readonly entries: LogEntry[] = [];

  debug(fields: Record<string, unknown>, message: string): void {
    this.#push('debug', fields, message);
  }

  info(fields: Record<string, unknown>, message: string): void {
    this.#push('info', fields, message);
  }

  warn(fields: Record<string, unknown>, message: string): void {
    this.#push('warn', fields, message);
  }

  error(fields: Record<string, unknown>, message: string): void {
    this.#push('error', fields, message);
  }

  #push(level: LogEntry['level'], fields: Record<string, unknown>, message: string): void {
    this.entries.push({ level, fields: { ...fields }, message });
  }
}
