export type RedisCounterFailure = 'not-connected' | 'timeout' | 'closed' | 'command-failed' | 'expired' | 'not-replicated';

/**
 * Why a hit() was rejected. The core's RateLimiter turns any rejection into its fail-open decision
 * and logs the counter's health (C-54); the message, which names host:port and never credentials,
 * is the `reason` of its warning.
 */
export class RedisCounterError extends Error {
  override readonly name = 'RedisCounterError';
  constructor(
    readonly reason: RedisCounterFailure,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /**
   * The call was late rather than Redis failing: it reached Redis after its deadline and counted
   * nothing ('expired'), or was not answered in time ('timeout'). The core's credential cache reads
   * it (CredentialFreshness: `late`) to drop only the lookup the call covered.
   */
  get late(): boolean {
    return this.reason === 'expired' || this.reason === 'timeout';
  }
}

/** A failure as one line: the message, or the code of an error without one. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) {
    // node's AggregateError (e.g. ECONNREFUSED on ::1 and 127.0.0.1) carries an empty message
    const code = (err as { code?: unknown }).code;
    return err.message || (typeof code === 'string' ? code : err.name);
  }
  return String(err);
}
