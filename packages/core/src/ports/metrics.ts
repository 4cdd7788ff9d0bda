/**
 * What the service counts for its operators (the cli implements it with prom-client and serves it
 * on the operations listener's GET /metrics). Core and the adapters report through this port only;
 * the default (noopMetrics) drops everything. Every method is cheap, synchronous and never throws:
 * it is called on the request path. Label values are closed sets or route templates, never a raw
 * path, a key, a digest or an id.
 */
export interface Metrics {
  /**
   * One request of the HTTP surface answered: `route` is the matched template
   * (`/v1/organisations/:org_id`) or `unmatched`; `status` is the HTTP status, or `aborted` when the
   * client hung up before its request was complete.
   */
  httpRequest(method: string, route: string, status: number | 'aborted', seconds: number): void;
  /** One rate-limit decision (C-50): allowed (also when failing open) or limited (429). */
  rateLimitDecision(scope: RateLimitScopeKind, decision: RateLimitOutcome): void;
  /** The counter failed or timed out and the request was allowed anyway (C-54). */
  rateCounterFailOpen(): void;
  /** A store call failed because the store was unreachable, too slow or refused it (what the API answers with 503, C-17). */
  storeError(): void;
  /** A request refused with 401 (C-32, C-36), and why. */
  authFailure(reason: AuthFailureReason): void;
  /** One webhook delivery attempt (C-59) and how it ended. */
  webhookDelivery(result: WebhookDeliveryResult): void;
}

/** The rate scopes of C-50 (RateScope['kind']). */
export type RateLimitScopeKind = 'organisation' | 'key' | 'unauthenticated' | 'source' | 'secret_scanning' | 'introspection';
export type RateLimitOutcome = 'allowed' | 'limited';
/**
 * missing: no Authorization header; malformed: not `Bearer <well-formed key>`; unknown_key: no such
 * key; revoked, expired: the key's status. A secret-scanning alert refused with 401:
 * scanner_signature_missing: no key identifier or signature header; scanner_unknown_key_identifier:
 * the identifier names no key of the programme's (after fetching its list again when configured);
 * scanner_bad_signature: the signature does not verify with that key (or, for a key set that cannot
 * say which keys it holds, with any key).
 */
export type AuthFailureReason =
  | 'missing'
  | 'malformed'
  | 'unknown_key'
  | 'revoked'
  | 'expired'
  | 'scanner_signature_missing'
  | 'scanner_unknown_key_identifier'
  | 'scanner_bad_signature';
/** delivered; retry: failed, another attempt is scheduled; failed: no attempt left (or no endpoint). */
export type WebhookDeliveryResult = 'delivered' | 'retry' | 'failed';
