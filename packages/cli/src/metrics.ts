/**
 * The Metrics port in the Prometheus text format (prom-client), served by the operations listener's
 * GET /metrics (ops-server.ts). Loaded only when OPS_PORT is set; otherwise the core keeps its
 * no-op metrics and this file, prom-client included, is never imported.
 *
 * One registry per instance (never prom-client's global one, so an embedder's own metrics and two
 * services in one process do not collide). On the request path every observation is a Map lookup
 * and an increment: label children are resolved once per label combination, not per request.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AuthFailureReason, Metrics, RateLimitOutcome, RateLimitScopeKind, WebhookDeliveryResult } from '@cos/core';

/** Seconds; most answers take a few ms, a store at its limit up to 2 s (C-17). */
export const HTTP_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** How long a scrape waits for the outbox depth before leaving the gauge as it was. */
export const OUTBOX_PENDING_TIMEOUT_MS = 1_000;

const SCOPES: readonly RateLimitScopeKind[] = ['organisation', 'unauthenticated', 'source', 'secret_scanning'];
const DECISIONS: readonly RateLimitOutcome[] = ['allowed', 'limited'];
const AUTH_REASONS: readonly AuthFailureReason[] = ['missing', 'malformed', 'unknown_key', 'revoked', 'expired'];
const DELIVERY_RESULTS: readonly WebhookDeliveryResult[] = ['delivered', 'retry', 'failed'];

interface Incrementable {
  inc(value?: number): void;
}
interface Observable {
  observe(value: number): void;
}

export class PrometheusMetrics implements Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly durations: Histogram<'method' | 'route'>;
  private readonly requestChildren = new Map<string, { count: Incrementable; duration: Observable }>();
  private readonly decisions = new Map<string, Incrementable>();
  private readonly failOpen: Counter;
  private readonly storeErrors: Counter;
  private readonly authFailures = new Map<string, Incrementable>();
  private readonly deliveries = new Map<string, Incrementable>();
  private outboxPending: (() => Promise<number>) | null = null;

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'cos_http_requests_total',
      help: 'HTTP requests answered by the API, by method, route template (or "unmatched") and status ("aborted": the client hung up first).',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.durations = new Histogram({
      name: 'cos_http_request_duration_seconds',
      help: 'Time from a request entering the API pipeline to its answer, by method and route template.',
      labelNames: ['method', 'route'],
      buckets: HTTP_DURATION_BUCKETS,
      registers,
    });
    const decisions = new Counter({
      name: 'cos_rate_limit_decisions_total',
      help: 'Rate-limit decisions by scope (organisation, unauthenticated, source, secret_scanning) and decision (allowed, limited); a fail-open is allowed.',
      labelNames: ['scope', 'decision'],
      registers,
    });
    this.failOpen = new Counter({
      name: 'cos_rate_counter_fail_open_total',
      help: 'Requests allowed without counting because the rate counter failed or did not answer in time (C-54).',
      registers,
    });
    this.storeErrors = new Counter({
      name: 'cos_store_errors_total',
      help: 'Store calls that failed because the database was unreachable, too slow or refused the connection (answered 503 on the API, C-17).',
      registers,
    });
    const auth = new Counter({
      name: 'cos_auth_failures_total',
      help: 'Requests refused with 401, by reason (missing, malformed, unknown_key, revoked, expired).',
      labelNames: ['reason'],
      registers,
    });
    const deliveries = new Counter({
      name: 'cos_webhook_deliveries_total',
      help: 'Webhook delivery attempts by result (delivered, retry, failed).',
      labelNames: ['result'],
      registers,
    });
    const pending = (): (() => Promise<number>) | null => this.outboxPending;
    new Gauge({
      name: 'cos_webhook_outbox_pending',
      help: 'Webhook notifications waiting for delivery (read from the store at scrape time).',
      registers,
      async collect() {
        const source = pending();
        if (source === null) return;
        const depth = await bounded(source(), OUTBOX_PENDING_TIMEOUT_MS);
        if (depth !== undefined) this.set(depth);
      },
    });
    // Every label value of the closed sets starts at 0, so rate() and alerts work from the first scrape.
    for (const scope of SCOPES) for (const decision of DECISIONS) this.decisions.set(`${scope} ${decision}`, decisions.labels(scope, decision));
    for (const reason of AUTH_REASONS) this.authFailures.set(reason, auth.labels(reason));
    for (const result of DELIVERY_RESULTS) this.deliveries.set(result, deliveries.labels(result));
    for (const child of [...this.decisions.values(), ...this.authFailures.values(), ...this.deliveries.values()]) child.inc(0);
  }

  /** Where cos_webhook_outbox_pending reads the outbox depth (Outbox.countPending). */
  observeOutbox(countPending: () => Promise<number>): void {
    this.outboxPending = countPending;
  }

  /** The Prometheus text exposition of everything registered. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  httpRequest(method: string, route: string, status: number | 'aborted', seconds: number): void {
    const key = `${method} ${route} ${status}`;
    let child = this.requestChildren.get(key);
    if (child === undefined) {
      child = { count: this.requests.labels(method, route, String(status)), duration: this.durations.labels(method, route) };
      this.requestChildren.set(key, child);
    }
    child.count.inc();
    child.duration.observe(seconds);
  }

  rateLimitDecision(scope: RateLimitScopeKind, decision: RateLimitOutcome): void {
    this.decisions.get(`${scope} ${decision}`)?.inc();
  }

  rateCounterFailOpen(): void {
    this.failOpen.inc();
  }

  storeError(): void {
    this.storeErrors.inc();
  }

  authFailure(reason: AuthFailureReason): void {
    this.authFailures.get(reason)?.inc();
  }

  webhookDelivery(result: WebhookDeliveryResult): void {
    this.deliveries.get(result)?.inc();
  }
}

/** The value, or undefined when it failed or took longer than `ms`. */
async function bounded<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work.catch(() => undefined), expired]);
  } finally {
    clearTimeout(timer);
  }
}

export function createPrometheusMetrics(): PrometheusMetrics {
  return new PrometheusMetrics();
}
