/**
 * The Metrics port in the Prometheus text format (prom-client), served by the operations listener's
 * GET /metrics (ops-server.ts). Loaded only when OPS_PORT is set; otherwise the core keeps its
 * no-op metrics and this file, prom-client included, is never imported.
 *
 * One registry per instance (never prom-client's global one, so an embedder's own metrics and two
 * services in one process do not collide). prom-client brings the process metrics, the registry and
 * the text format; the service's own counters and histogram are plain numbers on the request path
 * (one Map lookup and an addition per observation), rendered only when /metrics is read.
 */
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Registry, type Metric, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { AuthFailureReason, Metrics, RateLimitOutcome, RateLimitScopeKind, WebhookDeliveryResult } from '@cos/core';

/** Seconds; most answers take a few ms, a store at its limit up to 2 s (C-17). */
export const HTTP_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** How long a scrape waits for the outbox depth before leaving the gauge as it was. */
export const OUTBOX_PENDING_TIMEOUT_MS = 1_000;

const SCOPES: readonly RateLimitScopeKind[] = ['organisation', 'unauthenticated', 'source', 'secret_scanning'];
const DECISIONS: readonly RateLimitOutcome[] = ['allowed', 'limited'];
const AUTH_REASONS: readonly AuthFailureReason[] = [
  'missing',
  'malformed',
  'unknown_key',
  'revoked',
  'expired',
  'scanner_signature_missing',
  'scanner_unknown_key_identifier',
  'scanner_bad_signature',
];
const DELIVERY_RESULTS: readonly WebhookDeliveryResult[] = ['delivered', 'retry', 'failed'];

type Labels = Readonly<Record<string, string>>;
interface Sample {
  readonly metricName?: string;
  readonly labels: Labels;
  readonly value: number;
}

/** One series of a counter: incremented in place on the request path. */
interface CounterCell {
  readonly labels: Labels;
  value: number;
}

/** One series of a histogram: per-bucket counts (not cumulative), sum and count. */
interface HistogramCell {
  readonly labels: Labels;
  readonly counts: number[];
  sum: number;
  count: number;
}

/**
 * A metric kept in plain numbers and rendered by prom-client's registry at scrape time (the registry
 * reads `name`, `help`, `type` and `get()`). prom-client's own Counter and Histogram hash and
 * validate their labels on every increment, even through `labels()` children; here the request path
 * only adds to a number it already holds.
 */
abstract class ScrapedMetric {
  readonly aggregator = 'sum';
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'histogram',
  ) {}
  protected abstract samples(): Sample[];
  abstract reset(): void;
  get(): { name: string; help: string; type: string; aggregator: string; values: Sample[] } {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.samples() };
  }
  registerIn(registry: Registry): this {
    registry.registerMetric(this as unknown as Metric);
    return this;
  }
}

class ScrapedCounter extends ScrapedMetric {
  private readonly cells = new Map<string, CounterCell>();
  constructor(name: string, help: string) {
    super(name, help, 'counter');
  }
  /** The series of `labels` under `key` (created at 0, so it is exposed before its first increment). */
  cell(key: string, labels: Labels): CounterCell {
    let cell = this.cells.get(key);
    if (cell === undefined) {
      cell = { labels, value: 0 };
      this.cells.set(key, cell);
    }
    return cell;
  }
  protected samples(): Sample[] {
    return [...this.cells.values()].map((c) => ({ labels: c.labels, value: c.value }));
  }
  reset(): void {
    for (const cell of this.cells.values()) cell.value = 0;
  }
}

class ScrapedHistogram extends ScrapedMetric {
  private readonly cells = new Map<string, HistogramCell>();
  constructor(
    name: string,
    help: string,
    private readonly bounds: readonly number[],
  ) {
    super(name, help, 'histogram');
  }
  cell(key: string, labels: Labels): HistogramCell {
    let cell = this.cells.get(key);
    if (cell === undefined) {
      cell = { labels, counts: this.bounds.map(() => 0), sum: 0, count: 0 };
      this.cells.set(key, cell);
    }
    return cell;
  }
  observe(cell: HistogramCell, value: number): void {
    cell.sum += value;
    cell.count += 1;
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        cell.counts[i]! += 1;
        return;
      }
    }
  }
  protected samples(): Sample[] {
    const out: Sample[] = [];
    const bucket = `${this.name}_bucket`;
    for (const cell of this.cells.values()) {
      let cumulative = 0;
      this.bounds.forEach((bound, i) => {
        cumulative += cell.counts[i]!;
        out.push({ metricName: bucket, labels: { ...cell.labels, le: String(bound) }, value: cumulative });
      });
      out.push({ metricName: bucket, labels: { ...cell.labels, le: '+Inf' }, value: cell.count });
      out.push({ metricName: `${this.name}_sum`, labels: cell.labels, value: cell.sum });
      out.push({ metricName: `${this.name}_count`, labels: cell.labels, value: cell.count });
    }
    return out;
  }
  reset(): void {
    for (const cell of this.cells.values()) {
      cell.counts.fill(0);
      cell.sum = 0;
      cell.count = 0;
    }
  }
}

export class PrometheusMetrics implements Metrics {
  readonly registry = new Registry();
  private readonly requests: ScrapedCounter;
  private readonly durations: ScrapedHistogram;
  private readonly requestCells = new Map<string, { count: CounterCell; duration: HistogramCell }>();
  private readonly decisions: Record<string, Record<string, CounterCell>> = {};
  private readonly failOpen: CounterCell;
  private readonly storeErrors: CounterCell;
  private readonly authFailures: Record<string, CounterCell> = {};
  private readonly deliveries: Record<string, CounterCell> = {};
  private outboxPending: (() => Promise<number>) | null = null;

  constructor() {
    const registry = this.registry;
    collectDefaultMetrics({ register: registry });
    this.requests = new ScrapedCounter(
      'cos_http_requests_total',
      'HTTP requests answered by the API, by method, route template (or "unmatched") and status ("aborted": the client hung up first).',
    ).registerIn(registry);
    this.durations = new ScrapedHistogram(
      'cos_http_request_duration_seconds',
      'Time from a request entering the API pipeline to its answer, by method and route template.',
      HTTP_DURATION_BUCKETS,
    ).registerIn(registry);
    const decisions = new ScrapedCounter(
      'cos_rate_limit_decisions_total',
      'Rate-limit decisions by scope (organisation, unauthenticated, source, secret_scanning) and decision (allowed, limited); a fail-open is allowed.',
    ).registerIn(registry);
    this.failOpen = new ScrapedCounter(
      'cos_rate_counter_fail_open_total',
      'Requests allowed without counting because the rate counter failed or did not answer in time (C-54).',
    )
      .registerIn(registry)
      .cell('', {});
    this.storeErrors = new ScrapedCounter(
      'cos_store_errors_total',
      'Store calls that failed because the database was unreachable, too slow or refused the connection (answered 503 on the API, C-17).',
    )
      .registerIn(registry)
      .cell('', {});
    const auth = new ScrapedCounter(
      'cos_auth_failures_total',
      'Requests refused with 401, by reason (missing, malformed, unknown_key, revoked, expired).',
    ).registerIn(registry);
    const deliveries = new ScrapedCounter('cos_webhook_deliveries_total', 'Webhook delivery attempts by result (delivered, retry, failed).').registerIn(registry);
    const pending = (): (() => Promise<number>) | null => this.outboxPending;
    new Gauge({
      name: 'cos_webhook_outbox_pending',
      help: 'Webhook notifications waiting for delivery (read from the store at scrape time).',
      registers: [registry],
      // One store for every worker: a cluster's /metrics shows it once (the largest answer), unlabelled.
      aggregator: 'max',
      async collect() {
        const source = pending();
        if (source === null) return;
        const depth = await bounded(source(), OUTBOX_PENDING_TIMEOUT_MS);
        if (depth !== undefined) this.set(depth);
      },
    });
    // Every label value of the closed sets exists from the start (at 0), so rate() and alerts work from the first scrape.
    for (const scope of SCOPES) {
      const byDecision: Record<string, CounterCell> = {};
      for (const decision of DECISIONS) byDecision[decision] = decisions.cell(`${scope} ${decision}`, { scope, decision });
      this.decisions[scope] = byDecision;
    }
    for (const reason of AUTH_REASONS) this.authFailures[reason] = auth.cell(reason, { reason });
    for (const result of DELIVERY_RESULTS) this.deliveries[result] = deliveries.cell(result, { result });
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
    let cells = this.requestCells.get(key);
    if (cells === undefined) {
      cells = {
        count: this.requests.cell(key, { method, route, status: String(status) }),
        duration: this.durations.cell(`${method} ${route}`, { method, route }),
      };
      this.requestCells.set(key, cells);
    }
    cells.count.value += 1;
    this.durations.observe(cells.duration, seconds);
  }

  rateLimitDecision(scope: RateLimitScopeKind, decision: RateLimitOutcome): void {
    const cell = this.decisions[scope]?.[decision];
    if (cell !== undefined) cell.value += 1;
  }

  rateCounterFailOpen(): void {
    this.failOpen.value += 1;
  }

  storeError(): void {
    this.storeErrors.value += 1;
  }

  authFailure(reason: AuthFailureReason): void {
    const cell = this.authFailures[reason];
    if (cell !== undefined) cell.value += 1;
  }

  webhookDelivery(result: WebhookDeliveryResult): void {
    const cell = this.deliveries[result];
    if (cell !== undefined) cell.value += 1;
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

/** A worker's metrics as its registry gives them (`getMetricsAsJSON`), sent to the primary over IPC. */
export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** Metrics about the store every worker shares: shown once, without a worker label. */
const SHARED_METRICS: ReadonlySet<string> = new Set(['cos_webhook_outbox_pending']);

/**
 * The registry of `serve`'s primary process: its own process metrics (label worker="primary") and
 * the supervision counters (restarts per worker slot, workers ready).
 */
export class PrimaryMetrics {
  readonly registry = new Registry();
  private readonly restarts: Counter;
  private readonly ready: Gauge;

  constructor() {
    collectDefaultMetrics({ register: this.registry, labels: { worker: 'primary' } });
    this.restarts = new Counter({
      name: 'cos_worker_restarts_total',
      help: 'Workers that exited unexpectedly and were replaced, by worker slot.',
      labelNames: ['worker'],
      registers: [this.registry],
    });
    this.ready = new Gauge({ name: 'cos_workers_ready', help: 'Workers listening and answering, of cos_workers.', registers: [this.registry] });
    new Gauge({ name: 'cos_workers', help: 'Worker processes serve runs (WORKERS, --workers).', registers: [this.registry] }).set(0);
  }

  workers(configured: number): void {
    (this.registry.getSingleMetric('cos_workers') as Gauge).set(configured);
  }

  workersReady(n: number): void {
    this.ready.set(n);
  }

  restarted(slot: number): void {
    this.restarts.inc({ worker: String(slot) });
  }

  /**
   * One exposition for the whole service: every worker's series with a `worker` label (its slot,
   * 1 to N, kept by its replacement), the shared store gauges once, and the primary's own. Per
   * process rather than summed: a counter summed over workers would drop when one is replaced, which
   * Prometheus reads as a reset and counts again.
   */
  async render(workers: readonly { readonly slot: number; readonly metrics: MetricsJson }[]): Promise<string> {
    const labelled = workers.map(({ slot, metrics }) =>
      metrics.map((m) =>
        SHARED_METRICS.has(m.name)
          ? m
          : { ...m, aggregator: 'first', values: m.values.map((v) => ({ ...v, labels: { ...v.labels, worker: String(slot) } })) },
      ),
    );
    const own = (await this.registry.getMetricsAsJSON()).map((m) => ({ ...m, aggregator: 'first' }));
    return AggregatorRegistry.aggregate([...labelled, own]).metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
