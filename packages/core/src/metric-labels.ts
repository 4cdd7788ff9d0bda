import type { AuthFailureReason, RateLimitOutcome, RateLimitScopeKind, WebhookDeliveryResult } from './ports/metrics.js';

/**
 * The values, checked complete when compiled: a value added to the type and not to the list fails
 * the build, so an adapter that exposes every series from the start never misses one.
 */
function every<T>() {
  return <const A extends readonly T[]>(values: A & ([T] extends [A[number]] ? unknown : 'is missing a value of its type')): readonly T[] => values;
}

/** Every value of the Metrics port's labels, for adapters that expose each series at 0 from the start. */
export const RATE_LIMIT_SCOPE_KINDS = every<RateLimitScopeKind>()(['organisation', 'key', 'unauthenticated', 'source', 'secret_scanning', 'introspection']);
export const RATE_LIMIT_OUTCOMES = every<RateLimitOutcome>()(['allowed', 'limited']);
export const AUTH_FAILURE_REASONS = every<AuthFailureReason>()([
  'missing',
  'malformed',
  'unknown_key',
  'revoked',
  'expired',
  'scanner_signature_missing',
  'scanner_unknown_key_identifier',
  'scanner_bad_signature',
]);
export const WEBHOOK_DELIVERY_RESULTS = every<WebhookDeliveryResult>()(['delivered', 'retry', 'failed']);
