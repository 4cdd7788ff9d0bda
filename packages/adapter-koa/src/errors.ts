/**
 * The one place the HTTP adapter decides a status code (architecture guide, "Errors").
 *
 * ERROR_TABLE maps every error code the adapter can answer with (the core's DomainErrorCode family
 * plus the HTTP-only codes) to its status, content type and whether `details` is passed through.
 * renderError turns any thrown value into a status, headers and a body:
 * - every code but RATE_LIMIT_EXCEEDED: the spec's standard error `{error, message, details}`
 *   (`details` is `[]` unless VALIDATION_ERROR, CONFLICT or a missing scope's FORBIDDEN carry some,
 *   C-11, C-13, C-60);
 * - RATE_LIMIT_EXCEEDED: RFC 7807 `application/problem+json` (spec §7, C-51) and `Retry-After`;
 * - anything that is not a DomainError or an HttpError: 500 INTERNAL_ERROR whose message names only
 *   the request id (C-15); the caller logs the stack.
 * Domain errors are recognised by isDomainError (their cross-copy brand) and their `code`, never by
 * `instanceof`: a store or core built against another copy of @cos/core throws errors that are no
 * instances of this copy's classes, and they must still get their 4xx/503, not a 500.
 */
import { isDomainError, isDomainErrorWithCode, type DomainErrorCode, type ErrorDetail, type RateDecision } from '@cos/core';

/** Codes only the HTTP surface produces (C-9, C-10, and the 500 of the spec's code table). */
export type HttpOnlyErrorCode = 'METHOD_NOT_ALLOWED' | 'PAYLOAD_TOO_LARGE' | 'UNSUPPORTED_MEDIA_TYPE' | 'INTERNAL_ERROR';
export type HttpErrorCode = DomainErrorCode | HttpOnlyErrorCode;

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8';

export interface ErrorMapping {
  readonly status: number;
  /** Content type of the error body. */
  readonly contentType: typeof JSON_CONTENT_TYPE | typeof PROBLEM_CONTENT_TYPE;
  /** Whether the error's `details` reach the body (otherwise `details` is always `[]`). */
  readonly withDetails: boolean;
}

const standard = (status: number, withDetails = false): ErrorMapping =>
  Object.freeze({ status, contentType: JSON_CONTENT_TYPE, withDetails });

/** The one table: error code -> status (+ content type). Nothing else in the adapter picks an error status. */
export const ERROR_TABLE: Readonly<Record<HttpErrorCode, ErrorMapping>> = Object.freeze({
  VALIDATION_ERROR: standard(400, true),
  UNAUTHORIZED: standard(401),
  // A 403 for a missing scope names it (C-60); every other 403 carries no details.
  FORBIDDEN: standard(403, true),
  NOT_FOUND: standard(404),
  METHOD_NOT_ALLOWED: standard(405),
  CONFLICT: standard(409, true),
  PAYLOAD_TOO_LARGE: standard(413),
  UNSUPPORTED_MEDIA_TYPE: standard(415),
  RATE_LIMIT_EXCEEDED: Object.freeze({ status: 429, contentType: PROBLEM_CONTENT_TYPE, withDetails: false }),
  INTERNAL_ERROR: standard(500),
  SERVICE_UNAVAILABLE: standard(503),
  IDEMPOTENCY_KEY_REUSED: standard(422),
  IDEMPOTENCY_KEY_IN_USE: standard(409),
});

/** An error raised by the HTTP surface itself (unknown path, wrong method, body problems). */
export class HttpError extends Error {
  readonly code: HttpOnlyErrorCode | 'NOT_FOUND';
  /** Extra response headers, e.g. `Allow` on 405 (C-9). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: HttpOnlyErrorCode | 'NOT_FOUND', message: string, headers: Readonly<Record<string, string>> = {}) {
    super(message);
    this.name = 'HttpError';
    this.code = code;
    this.headers = headers;
  }
}

/**
 * A request refused at the HTTP layer (its framing, `Host`, `Expect`, or a parse error of its
 * connection): answered like client-error.ts answers what Node's parser refuses, a VALIDATION_ERROR
 * in the standard shape with the status that table gives (400, 417, ...). The connection is closed.
 */
export class RefusedRequestError extends Error {
  constructor(readonly answer: { readonly status: number; readonly message: string; readonly details: readonly ErrorDetail[] }) {
    super(answer.message);
    this.name = 'RefusedRequestError';
  }
}

// ---- the HTTP surface's own errors, with their wording ----

/** C-9: no route has this path. */
export const unknownPath = (): HttpError => new HttpError('NOT_FOUND', 'No such resource path');

/** C-9: the path exists, the method does not; `Allow` lists the methods it has. */
export const methodNotAllowed = (method: string, allow: string): HttpError =>
  new HttpError('METHOD_NOT_ALLOWED', `Method ${method} is not allowed on this path; allowed: ${allow}`, { Allow: allow });

/** C-10: the body exceeds the configured limit (64 KiB by default). */
export const payloadTooLarge = (limitBytes: number): HttpError =>
  new HttpError('PAYLOAD_TOO_LARGE', `Request body exceeds the limit of ${limitBytes} bytes`);

/** C-10: a body-carrying request whose content type is not JSON. */
export const unsupportedMediaType = (): HttpError =>
  new HttpError('UNSUPPORTED_MEDIA_TYPE', 'Request bodies must be JSON (Content-Type: application/json)');

/** C-10: a compressed (or otherwise encoded) body: the service reads only plain JSON (RFC 7694 answers 415). */
export const unsupportedContentEncoding = (): HttpError =>
  new HttpError('UNSUPPORTED_MEDIA_TYPE', 'Request bodies must not be compressed (no Content-Encoding); send plain JSON');

const internalErrorMessage = (requestId: string): string =>
  `An unexpected error occurred; quote request id ${requestId} when reporting it`;

/** The spec's standard error body (§7). */
export interface StandardErrorBody {
  error: HttpErrorCode;
  message: string;
  details: ErrorDetail[];
}

/** The spec's rate-limit error body (§7, RFC 7807). */
export interface ProblemBody {
  type: string;
  title: 'Rate Limit Exceeded';
  status: 429;
  detail: string;
  svc_error_code: 'RATE_LIMIT_EXCEEDED';
  retry_after: number;
  instance: string;
  /** The window that refused a request whose key authenticated (an RFC 7807 extension member). */
  limit_scope?: 'organisation' | 'key';
}

export interface RenderedError {
  readonly status: number;
  readonly contentType: string;
  /** Serialised JSON body. */
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
  /** The code answered with. */
  readonly code: HttpErrorCode;
  /** True when the error was not one the service knows (a 500): the caller logs its stack. */
  readonly unexpected: boolean;
  /** The rate decision carried by a RATE_LIMIT_EXCEEDED error, for the X-RateLimit-* headers. */
  readonly decision: RateDecision | undefined;
}

export interface RenderContext {
  readonly requestId: string;
  /** Path of the request as the client sent it, without the query: the 429 `instance`. */
  readonly instance: string;
  /** Base of the 429 `type` address (C-51), without a trailing slash. */
  readonly errorsUrl: string;
}

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});
const CLOSE_HEADERS: Readonly<Record<string, string>> = Object.freeze({ Connection: 'close' });

/** The serialised standard error body (§7); details only for codes whose ERROR_TABLE row carries them. */
export function standardBody(code: HttpErrorCode, message: string, details: readonly ErrorDetail[]): string {
  const body: StandardErrorBody = {
    error: code,
    message,
    details: ERROR_TABLE[code].withDetails ? details.map((d) => ({ field: d.field, issue: d.issue })) : [],
  };
  return JSON.stringify(body);
}

/**
 * The 429 answer (C-51, C-52) for a refused decision: from renderError for a thrown RateLimitedError,
 * and directly for the refusals the pipeline decides itself (no error object is made for those: a
 * flood of refused requests is the one case where that cost adds up).
 */
export function renderRateLimited(decision: RateDecision, message: string, rc: RenderContext): RenderedError {
  const mapping = ERROR_TABLE.RATE_LIMIT_EXCEEDED;
  const retryAfter = decision.retryAfterSeconds;
  const body: ProblemBody = {
    type: `${rc.errorsUrl}/rate-limit-exceeded`,
    title: 'Rate Limit Exceeded',
    status: 429,
    detail: message,
    svc_error_code: 'RATE_LIMIT_EXCEEDED',
    retry_after: retryAfter,
    instance: rc.instance,
    ...(decision.limitScope !== undefined ? { limit_scope: decision.limitScope } : {}),
  };
  return {
    status: mapping.status,
    contentType: mapping.contentType,
    body: JSON.stringify(body),
    headers: { 'Retry-After': String(retryAfter) },
    code: 'RATE_LIMIT_EXCEEDED',
    unexpected: false,
    decision,
  };
}

/** Maps any thrown value to the response the client gets. */
export function renderError(err: unknown, rc: RenderContext): RenderedError {
  if (isDomainErrorWithCode(err, 'RATE_LIMIT_EXCEEDED')) return renderRateLimited(err.decision, err.message, rc);
  if (isDomainError(err)) {
    const mapping = ERROR_TABLE[err.code];
    return {
      status: mapping.status,
      contentType: mapping.contentType,
      body: standardBody(err.code, err.message, err.details),
      headers: NO_HEADERS,
      code: err.code,
      unexpected: false,
      decision: undefined,
    };
  }
  if (err instanceof RefusedRequestError) {
    return {
      status: err.answer.status,
      contentType: JSON_CONTENT_TYPE,
      body: standardBody('VALIDATION_ERROR', err.answer.message, err.answer.details),
      headers: CLOSE_HEADERS,
      code: 'VALIDATION_ERROR',
      unexpected: false,
      decision: undefined,
    };
  }
  if (err instanceof HttpError) {
    const mapping = ERROR_TABLE[err.code];
    return {
      status: mapping.status,
      contentType: mapping.contentType,
      body: standardBody(err.code, err.message, []),
      headers: err.headers,
      code: err.code,
      unexpected: false,
      decision: undefined,
    };
  }
  const mapping = ERROR_TABLE.INTERNAL_ERROR;
  return {
    status: mapping.status,
    contentType: mapping.contentType,
    body: standardBody('INTERNAL_ERROR', internalErrorMessage(rc.requestId), []),
    headers: NO_HEADERS,
    code: 'INTERNAL_ERROR',
    unexpected: true,
    decision: undefined,
  };
}
