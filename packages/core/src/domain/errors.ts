/**
 * The closed family of domain errors. Each carries one of the contract's codes; the HTTP adapter
 * maps code -> status and body in one table (adapter-koa/src/errors.ts), the CLI maps them to a
 * one-line message and a non-zero exit.
 *
 * Recognise them with isDomainError / isDomainErrorWithCode, not `instanceof`: when two copies of
 * @cos/core are loaded (two versions in an embedder's node_modules, a mixed CJS/ESM or tsx graph),
 * an error thrown by code built against one copy is no `instanceof` the other copy's classes. Every
 * instance carries the registry-wide brand Symbol.for('cos.DomainError'), which both copies see.
 */
import { KEY_ALREADY_ROLLED_MESSAGE } from './api-key.js';
import type { RateDecision } from './rate-window.js';

export type DomainErrorCode =
  | 'VALIDATION_ERROR'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'RATE_LIMIT_EXCEEDED'
  | 'SERVICE_UNAVAILABLE'
  | 'IDEMPOTENCY_KEY_REUSED'
  | 'IDEMPOTENCY_KEY_IN_USE';

/** Every DomainErrorCode (the Record makes the compiler insist on all of them). */
const CODE_TABLE: Readonly<Record<DomainErrorCode, true>> = {
  VALIDATION_ERROR: true,
  UNAUTHORIZED: true,
  FORBIDDEN: true,
  NOT_FOUND: true,
  CONFLICT: true,
  RATE_LIMIT_EXCEEDED: true,
  SERVICE_UNAVAILABLE: true,
  IDEMPOTENCY_KEY_REUSED: true,
  IDEMPOTENCY_KEY_IN_USE: true,
};
/** Every DomainErrorCode, for checking a code that arrives from another copy of @cos/core. */
export const DOMAIN_ERROR_CODES: readonly DomainErrorCode[] = Object.freeze(Object.keys(CODE_TABLE) as DomainErrorCode[]);
const KNOWN_CODES: ReadonlySet<string> = new Set(DOMAIN_ERROR_CODES);

/**
 * The brand every DomainError carries (value `true`). `Symbol.for` gives the same symbol in every
 * module instance of the process, so the brand survives duplicated copies of this package.
 */
export const DOMAIN_ERROR_BRAND: unique symbol = Symbol.for('cos.DomainError');

/** One invalid field: `{field, issue}` as in the spec's standard error `details`. */
export interface ErrorDetail {
  readonly field: string;
  readonly issue: string;
}

export abstract class DomainError extends Error {
  /** The cross-copy brand (see isDomainError). */
  readonly [DOMAIN_ERROR_BRAND] = true as const;
  abstract readonly code: DomainErrorCode;
  readonly details: readonly ErrorDetail[];

  protected constructor(message: string, details: readonly ErrorDetail[] = []) {
    // Domain errors are answers (401, 403, 404, 429, ...), not faults: nothing reads their stack,
    // and capturing one was the dearest step of refusing a request (the 429 path of pnpm bench).
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = stackTraceLimit;
    this.name = new.target.name;
    this.details = details;
  }
}

export class ValidationError extends DomainError {
  readonly code = 'VALIDATION_ERROR' as const;
  constructor(details: readonly ErrorDetail[], message = 'Request validation failed') {
    super(message, details);
  }
}

export const UNAUTHORIZED_MESSAGE = 'Missing or invalid API key';

export class UnauthorizedError extends DomainError {
  readonly code = 'UNAUTHORIZED' as const;
  constructor(message = UNAUTHORIZED_MESSAGE) {
    super(message);
  }
}

export const PLATFORM_REQUIRED_MESSAGE = 'This operation requires a platform-org API key';
export const FOREIGN_ORGANISATION_MESSAGE = "This API key cannot access another organisation's resources";

export class ForbiddenError extends DomainError {
  readonly code = 'FORBIDDEN' as const;
  /** `details` name a missing scope (C-60); every other 403 has none. */
  constructor(message = PLATFORM_REQUIRED_MESSAGE, details: readonly ErrorDetail[] = []) {
    super(message, details);
  }
}

/**
 * What was not found, for callers that branch on it (the CLI's `webhook remove` tells an
 * organisation without an endpoint from one that does not exist) instead of on the sentence.
 */
export type NotFoundResource = 'organisation' | 'member' | 'api_key' | 'webhook' | 'notification' | 'delivery' | 'resource';

export class NotFoundError extends DomainError {
  readonly code = 'NOT_FOUND' as const;
  readonly resource: NotFoundResource;
  constructor(message = 'Resource not found', options?: { resource?: NotFoundResource }) {
    super(message);
    this.resource = options?.resource ?? 'resource';
  }
}

export class ConflictError extends DomainError {
  readonly code = 'CONFLICT' as const;
  constructor(message: string, details: readonly ErrorDetail[] = []) {
    super(message, details);
  }
}

/** The 404 of an organisation that does not exist (or was never visible to the caller). */
export const ORGANISATION_NOT_FOUND_MESSAGE = 'Organisation not found';

export function organisationNotFound(): NotFoundError {
  return new NotFoundError(ORGANISATION_NOT_FOUND_MESSAGE, { resource: 'organisation' });
}

/**
 * The uniqueness rules every store enforces. A store maps its own constraint (a SQL unique index,
 * an in-memory map) to one of these and throws `uniqueConflict(rule)`: the sentence and details are
 * the domain's, the same on every store.
 */
export type UniqueRule = 'slug' | 'email' | 'digest' | 'rolled_key' | 'id' | 'unknown';

/**
 * The ConflictError of a broken uniqueness rule. `record` names the record of a duplicated id
 * ("Organisation id already exists"); without it the sentence speaks of a record.
 */
export function uniqueConflict(rule: UniqueRule, record?: string): ConflictError {
  switch (rule) {
    case 'slug':
      return new ConflictError('Slug already taken', [{ field: 'slug', issue: 'already taken' }]);
    case 'email':
      return new ConflictError('A member with this e-mail already exists in the organisation', [{ field: 'email', issue: 'already taken' }]);
    case 'digest':
      return new ConflictError('An API key with this digest already exists', [{ field: 'key', issue: 'already exists' }]);
    case 'rolled_key':
      return new ConflictError(KEY_ALREADY_ROLLED_MESSAGE);
    case 'id':
      return new ConflictError(record === undefined ? 'A record with this id already exists' : `${record} id already exists`, [
        { field: 'id', issue: 'already exists' },
      ]);
    case 'unknown':
      return new ConflictError('The record conflicts with an existing one');
  }
}

/** The 429 message (the problem body's `detail`) for a refused decision. */
export function rateLimitExceededMessage(decision: RateDecision): string {
  return `Rate limit of ${decision.limit} requests per minute exceeded; retry after ${decision.retryAfterSeconds} seconds`;
}

/** Thrown when a rate-limit decision refuses the request; carries the decision for headers. */
export class RateLimitedError extends DomainError {
  readonly code = 'RATE_LIMIT_EXCEEDED' as const;
  readonly decision: RateDecision;
  constructor(decision: RateDecision, message?: string) {
    super(message ?? rateLimitExceededMessage(decision));
    this.decision = decision;
  }
}

/**
 * What was unavailable: `store`, the database (or whatever backs the store ports);
 * `credential_fence`, the shared counter store that must register a credential change before it is
 * made (credential-fence.ts): nothing was changed. Callers that explain a 503 (the CLI) branch on it.
 */
export type UnavailableReason = 'store' | 'credential_fence';

/** The 503 of a store that is unreachable, too slow or refused the call (C-17). */
export const STORE_UNAVAILABLE_MESSAGE = 'The store is unavailable; retry with exponential backoff';

/** The UnavailableError a store throws when its database fails it: the sentence is the domain's. */
export function storeUnavailable(cause?: unknown): UnavailableError {
  return new UnavailableError(STORE_UNAVAILABLE_MESSAGE, { cause, reason: 'store' });
}

/** A dependency is unreachable or too slow; transient. */
export class UnavailableError extends DomainError {
  readonly code = 'SERVICE_UNAVAILABLE' as const;
  readonly reason: UnavailableReason;
  constructor(
    message = 'Service temporarily unavailable; retry with exponential backoff',
    options?: { cause?: unknown; reason?: UnavailableReason },
  ) {
    super(message);
    this.reason = options?.reason ?? 'store';
    if (options?.cause !== undefined) (this as { cause?: unknown }).cause = options.cause;
  }
}

/** Each code and the error that carries it. */
export const IDEMPOTENCY_KEY_REUSED_MESSAGE =
  'This Idempotency-Key was already used with a different request (method, path or body); use a new key for a new request';
export const IDEMPOTENCY_KEY_IN_USE_MESSAGE = 'A request with this Idempotency-Key is still being processed; retry once it has finished';

/** The same idempotency key with a different request (422). */
export class IdempotencyKeyReusedError extends DomainError {
  readonly code = 'IDEMPOTENCY_KEY_REUSED' as const;
  constructor(message = IDEMPOTENCY_KEY_REUSED_MESSAGE) {
    super(message);
  }
}

/** A repeat while the first request with the key is still running (409). */
export class IdempotencyKeyInUseError extends DomainError {
  readonly code = 'IDEMPOTENCY_KEY_IN_USE' as const;
  constructor(message = IDEMPOTENCY_KEY_IN_USE_MESSAGE) {
    super(message);
  }
}

export interface DomainErrorByCode {
  VALIDATION_ERROR: ValidationError;
  UNAUTHORIZED: UnauthorizedError;
  FORBIDDEN: ForbiddenError;
  NOT_FOUND: NotFoundError;
  CONFLICT: ConflictError;
  RATE_LIMIT_EXCEEDED: RateLimitedError;
  SERVICE_UNAVAILABLE: UnavailableError;
  IDEMPOTENCY_KEY_REUSED: IdempotencyKeyReusedError;
  IDEMPOTENCY_KEY_IN_USE: IdempotencyKeyInUseError;
}

function isRateDecision(d: unknown): d is RateDecision {
  if (typeof d !== 'object' || d === null) return false;
  const r = d as Record<string, unknown>;
  return (
    typeof r['allowed'] === 'boolean' &&
    typeof r['degraded'] === 'boolean' &&
    ['limit', 'remaining', 'resetEpochSeconds', 'retryAfterSeconds'].every((k) => typeof r[k] === 'number' && Number.isFinite(r[k]))
  );
}

function isErrorDetail(d: unknown): d is ErrorDetail {
  return typeof d === 'object' && d !== null && typeof (d as ErrorDetail).field === 'string' && typeof (d as ErrorDetail).issue === 'string';
}

/**
 * True for an error of the family, from this copy of @cos/core or from any other: it carries the
 * brand, one of the contract's codes, a string message and `{field, issue}` details, and a
 * RATE_LIMIT_EXCEEDED carries its decision (read structurally). Never `instanceof`.
 */
export function isDomainError(e: unknown): e is DomainError {
  if (typeof e !== 'object' || e === null) return false;
  const candidate = e as Partial<Record<typeof DOMAIN_ERROR_BRAND, unknown>> & Record<string, unknown>;
  if (candidate[DOMAIN_ERROR_BRAND] !== true) return false;
  const code = candidate['code'];
  if (typeof code !== 'string' || !KNOWN_CODES.has(code)) return false;
  if (typeof candidate['message'] !== 'string') return false;
  const details = candidate['details'];
  if (!Array.isArray(details) || !details.every(isErrorDetail)) return false;
  return code !== 'RATE_LIMIT_EXCEEDED' || isRateDecision(candidate['decision']);
}

/** isDomainError with that code, typed as the error that carries it (e.g. UNAUTHORIZED -> UnauthorizedError). */
export function isDomainErrorWithCode<C extends DomainErrorCode>(e: unknown, code: C): e is DomainErrorByCode[C] {
  return isDomainError(e) && e.code === code;
}
