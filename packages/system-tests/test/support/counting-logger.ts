import type { Logger } from '@cos/core';

/** A Logger that keeps counts and the first few warnings and errors only (bounded memory for a soak). */
export class CountingLogger implements Logger {
  readonly counts = { debug: 0, info: 0, warn: 0, error: 0 };
  readonly notable: { level: string; message: string; fields: Record<string, unknown> }[] = [];

  private note(level: 'debug' | 'info' | 'warn' | 'error', fields: Record<string, unknown>, message: string): void {
    this.counts[level] += 1;
    if ((level === 'warn' || level === 'error') && this.notable.length < 20) this.notable.push({ level, message, fields });
  }

  debug(fields: Record<string, unknown>, message: string): void {
    this.note('debug', fields, message);
  }
  info(fields: Record<string, unknown>, message: string): void {
    this.note('info', fields, message);
  }
  warn(fields: Record<string, unknown>, message: string): void {
    this.note('warn', fields, message);
  }
  error(fields: Record<string, unknown>, message: string): void {
    this.note('error', fields, message);
  }
}
