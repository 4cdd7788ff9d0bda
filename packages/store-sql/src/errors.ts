/**
 * Driver errors -> the core's error family (architecture "Errors", C-13, C-17).
 *  - unique violations (SQLite SQLITE_CONSTRAINT_UNIQUE / PRIMARYKEY, Postgres 23505) -> the
 *    domain's uniqueness rule they broke -> core's uniqueConflict (the sentence and details are the
 *    domain's, the same as the in-memory store's);
 *  - a foreign key violation (an organisation deleted under a write) -> core's organisationNotFound;
 *  - a refused, lost or too slow connection -> UnavailableError (503 SERVICE_UNAVAILABLE).
 * Domain errors pass through untouched. A ConflictError never carries the driver error as its cause:
 * Postgres puts the duplicated value (e.g. a key digest) into the error's `detail`.
 */
import { isDomainError, LogThrottle, organisationNotFound, storeUnavailable, uniqueConflict, type UniqueRule } from '@cos/core';
import type { Logger, Metrics } from '@cos/core';

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);

/**
 * SQLSTATEs that mean "the database is not there or not answering": class 08 (connection
 * exception), 53 (insufficient resources, e.g. too many connections), 57P01-57P05 (shutdown,
 * crash, cannot connect now, idle session timeout), 57014 (statement timeout), 55P03 (lock timeout),
 * 40P01 (deadlock, transient), 25P03 (idle-in-transaction timeout).
 */
function isUnavailableSqlState(code: string): boolean {
  return (
    code.startsWith('08') ||
    code.startsWith('53') ||
    code.startsWith('57P') ||
    code === '57014' ||
    code === '55P03' ||
    code === '40P01' ||
    code === '25P03'
  );
}

const SQLITE_UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|PROTOCOL|FULL)/;

const UNAVAILABLE_MESSAGES =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|timeout expired|Query read timeout|not queryable|Connection ended|Timeout acquiring a connection|Unable to acquire a connection|Client was closed|ECONNREFUSED|ECONNRESET|database is locked/i;

interface DriverError {
  readonly name?: unknown;
  readonly code?: unknown;
  readonly message?: unknown;
  readonly constraint?: unknown;
  readonly errors?: unknown;
}

function asDriverError(e: unknown): DriverError {
  return typeof e === 'object' && e !== null ? (e as DriverError) : {};
}

function isUnavailable(e: unknown): boolean {
  const err = asDriverError(e);
  const code = typeof err.code === 'string' ? err.code : '';
  if (code !== '') {
    if (NETWORK_CODES.has(code) || SQLITE_UNAVAILABLE.test(code)) return true;
    if (/^[0-9A-Z]{5}$/.test(code) && isUnavailableSqlState(code)) return true;
  }
  if (err.name === 'KnexTimeoutError') return true;
  // Node's happy-eyeballs connect gives an AggregateError whose members carry the codes.
  if (Array.isArray(err.errors) && err.errors.length > 0 && err.errors.every((inner) => isUnavailable(inner))) return true;
  return typeof err.message === 'string' && UNAVAILABLE_MESSAGES.test(err.message) && !/constraint/i.test(err.message);
}

/** The domain's uniqueness rule a unique violation broke, from its constraint's name or message. */
function uniqueTarget(err: DriverError): UniqueRule | null {
  const code = typeof err.code === 'string' ? err.code : '';
  const message = typeof err.message === 'string' ? err.message : '';
  if (code === '23505') {
    const constraint = typeof err.constraint === 'string' ? err.constraint : '';
    if (constraint === 'organisations_slug_unique') return 'slug';
    if (constraint === 'members_organisation_email_unique') return 'email';
    if (constraint === 'api_keys_digest_unique') return 'digest';
    if (constraint === 'api_keys_rolled_from_unique') return 'rolled_key';
    if (constraint.endsWith('_pkey')) return 'id';
    return 'unknown';
  }
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || /UNIQUE constraint failed/.test(message)) {
    if (/organisations\.slug/.test(message)) return 'slug';
    if (/members\.email_normalized/.test(message)) return 'email';
    if (/api_keys\.digest/.test(message)) return 'digest';
    if (/api_keys\.rolled_from_key_id/.test(message)) return 'rolled_key';
    if (/\.id\b/.test(message)) return 'id';
    return 'unknown';
  }
  return null;
}

function isForeignKeyViolation(err: DriverError): boolean {
  const message = typeof err.message === 'string' ? err.message : '';
  return err.code === '23503' || err.code === 'SQLITE_CONSTRAINT_FOREIGNKEY' || /FOREIGN KEY constraint failed/.test(message);
}

const WARN_INTERVAL_MS = 10_000;

/**
 * Translates driver errors; logs "store unavailable" at most once per 10 s while it stays down, and
 * counts every such error (Metrics.storeError).
 */
export class ErrorTranslator {
  private readonly warnings = new LogThrottle(WARN_INTERVAL_MS, Date.now);

  constructor(
    private readonly logger: Logger | undefined,
    private readonly metrics?: Pick<Metrics, 'storeError'>,
  ) {}

  translate(e: unknown): unknown {
    if (isDomainError(e)) return e;
    const err = asDriverError(e);
    const unique = uniqueTarget(err);
    if (unique !== null) return uniqueConflict(unique);
    if (isForeignKeyViolation(err)) return organisationNotFound();
    if (isUnavailable(e)) {
      this.metrics?.storeError();
      this.warn(err);
      return storeUnavailable(e);
    }
    return e;
  }

  private warn(err: DriverError): void {
    if (this.logger === undefined) return;
    if (this.warnings.pass() === null) return;
    // Only the code and the error class: messages may quote SQL, never bindings, but stay terse anyway.
    this.logger.warn(
      { code: typeof err.code === 'string' ? err.code : undefined, error: typeof err.name === 'string' ? err.name : 'Error' },
      'SQL store unavailable',
    );
  }
}
