/**
 * The closed family of domain errors. Each carries one of the contract's codes; the HTTP adapter
 * maps code -> status and body in one table (adapter-koa/src/errors.ts), the CLI maps them to a
 * one-line message and a non-zero exit.
 */
import type { RateDecision } from './rate-window.js';

export type DomainErrorCode =
  | 'VALIDATION_ERROR'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'RATE_LIMIT_EXCEEDED'
  | 'SERVICE_UNAVAILABLE';

/** One invalid field: `{field, issue}` as in the spec's standard error `details`. */
export interface ErrorDetail {
  readonly field: string;
  readonly issue: string;
}

export abstract class DomainError extends Error {
  abstract readonly code: DomainErrorCode;
  readonly details: readonly ErrorDetail[];

  protected constructor(message: string, details: readonly ErrorDetail[] = []) {
    super(message);
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
  constructor(message = PLATFORM_REQUIRED_MESSAGE) {
    super(message);
  }
}

export class NotFoundError extends DomainError {
  readonly code = 'NOT_FOUND' as const;
  constructor(message = 'Resource not found') {
    super(message);
  }
}

export class ConflictError extends DomainError {
  readonly code = 'CONFLICT' as const;
  constructor(message: string, details: readonly ErrorDetail[] = []) {
    super(message, details);
  }
}

/** Thrown when a rate-limit decision refuses the request; carries the decision for headers. */
export class RateLimitedError extends DomainError {
  readonly code = 'RATE_LIMIT_EXCEEDED' as const;
  readonly decision: RateDecision;
  constructor(decision: RateDecision, message?: string) {
    super(
      message ??
        `Rate limit of ${decision.limit} requests per minute exceeded; retry after ${decision.retryAfterSeconds} seconds`,
    );
    this.decision = decision;
  }
}

/** A dependency (the store) is unreachable or too slow; transient. */
export class UnavailableError extends DomainError {
  readonly code = 'SERVICE_UNAVAILABLE' as const;
  constructor(message = 'Service temporarily unavailable; retry with exponential backoff', options?: { cause?: unknown }) {
    super(message);
    if (options?.cause !== undefined) (this as { cause?: unknown }).cause = options.cause;
  }
}

export function isDomainError(e: unknown): e is DomainError {
  return e instanceof DomainError;
}
