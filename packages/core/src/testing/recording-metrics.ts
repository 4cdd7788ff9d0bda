import type { AuthFailureReason, Metrics, RateLimitOutcome, RateLimitScopeKind, WebhookDeliveryResult } from '../ports/metrics.js';

/** One call of the Metrics port, as recorded by RecordingMetrics. */
export type MetricEvent =
  | { readonly kind: 'httpRequest'; readonly method: string; readonly route: string; readonly status: number | 'aborted'; readonly seconds: number }
  | { readonly kind: 'rateLimitDecision'; readonly scope: RateLimitScopeKind; readonly decision: RateLimitOutcome }
  | { readonly kind: 'rateCounterFailOpen' }
  | { readonly kind: 'storeError' }
  | { readonly kind: 'authFailure'; readonly reason: AuthFailureReason }
  | { readonly kind: 'webhookDelivery'; readonly result: WebhookDeliveryResult };

/** A Metrics port that records every call, in order (for tests of what is counted). */
export class RecordingMetrics implements Metrics {
  readonly events: MetricEvent[] = [];

  httpRequest(method: string, route: string, status: number | 'aborted', seconds: number): void {
    this.events.push({ kind: 'httpRequest', method, route, status, seconds });
  }
  rateLimitDecision(scope: RateLimitScopeKind, decision: RateLimitOutcome): void {
    this.events.push({ kind: 'rateLimitDecision', scope, decision });
  }
  rateCounterFailOpen(): void {
    this.events.push({ kind: 'rateCounterFailOpen' });
  }
  storeError(): void {
    this.events.push({ kind: 'storeError' });
  }
  authFailure(reason: AuthFailureReason): void {
    this.events.push({ kind: 'authFailure', reason });
  }
  webhookDelivery(result: WebhookDeliveryResult): void {
    this.events.push({ kind: 'webhookDelivery', result });
  }

  /** The recorded calls of one kind. */
  of<K extends MetricEvent['kind']>(kind: K): Extract<MetricEvent, { kind: K }>[] {
    return this.events.filter((e): e is Extract<MetricEvent, { kind: K }> => e.kind === kind);
  }

  clear(): void {
    this.events.length = 0;
  }
}
