/** Structured logger (pino-compatible call shape). Core logs only through this port. */
export interface Logger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
  /**
   * Optional: false when lines at `level` are dropped, so a caller can skip building their fields
   * (the per-request access line). A logger without it is treated as logging every level.
   */
  isLevelEnabled?(level: LogLevel): boolean;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
