/**
 * The Metrics port in the Prometheus text format (prom-client), served by the operations listener's
 * GET /metrics (ops-server.ts). Loaded only when OPS_PORT is set; otherwise the core keeps its
 * no-op metrics and this file, prom-client included, is never imported.
 *
 * One registry per instance (never prom-client's global one, so an embedder's own metrics and two
 * services in one process do not collide). Every metric is prom-client's own Counter, Histogram or
 * Gauge. The request path never calls prom-client: it adds to plain numbers of a series it already
 * holds (prom-client's inc() and observe() hash and validate the labels on every call, even through
 * labels() children, several times the cost), and each read of a metric (a scrape) hands prom-client
 * what was recorded since: counters through their own inc(), the duration histogram as its samples.
 */
import {
  AggregatorRegistry,
  collectDefaultMetrics,
  Counter,
  Gauge,
  Histogram,
  Registry,
  type LabelValues,
  type MetricObjectWithValues,
  type MetricValue,
  type MetricValueWithName,
} from 'prom-client';
import {
  AUTH_FAILURE_REASONS,
  RATE_LIMIT_OUTCOMES,
  RATE_LIMIT_SCOPE_KINDS,
  WEBHOOK_DELIVERY_RESULTS,
  type AuthFailureReason,
  type Metrics,
  type RateLimitOutcome,
  type RateLimitScopeKind,
  type WebhookDeliveryResult,
} from '@cos/core';

/** Seconds; most answers take a few ms, a store at its limit up to 2 s (C-17). */
export const HTTP_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** How long a scrape waits for the outbox depth before leaving the gauge as it was. */
export const OUTBOX_PENDING_TIMEOUT_MS = 1_000;

declare module 'prom-client' {
  interface Histogram<T extends string> {
    /**
     * What prom-client 15's registry renders a histogram's text from (its get() is this with the
     * JSON's label layout); present at run time, missing from its type declarations.
     */
    getForPromString(): Promise<MetricObjectWithValues<MetricValueWithName<T>>>;
  }
}

/** One series of a counter: what the request path added since the last read, not yet in prom-client's series. */
interface CounterSeries<L extends string> {
  readonly labels: LabelValues<L>;
  pending: number;
}

/**
 * prom-client's Counter, counted on the request path through series it hands out once per label
 * set (`series`) and brought up to date each time it is read.
 */
class SeriesCounter<L extends string = never> extends Counter<L> {
  readonly #series: CounterSeries<L>[] = [];

  constructor(registry: Registry, name: string, help: string, labelNames: readonly L[] = []) {
    super({ name, help, labelNames, registers: [registry] });
  }

  /** The series of `labels`, exposed (at 0) from now on, before its first increment. */
  series(labels: LabelValues<L>): CounterSeries<L> {
    const series: CounterSeries<L> = { labels, pending: 0 };
    this.inc(labels, 0);
    this.#series.push(series);
    return series;
  }

  override async get(): Promise<MetricObjectWithValues<MetricValue<L>>> {
    for (const series of this.#series) {
      if (series.pending === 0) continue;
      this.inc(series.labels, series.pending);
      series.pending = 0;
    }
    return super.get();
  }

  /** Every series back to 0, still exposed. */
  override reset(): void {
    super.reset();
    if (!(#series in this)) return; // prom-client's constructor resets before this class's fields exist
    for (const series of this.#series) {
      series.pending = 0;
      this.inc(series.labels, 0);
    }
  }
}

/** One series of the histogram: per-bucket counts (not cumulative), sum and count, and its labels as exposed. */
interface HistogramSeries<L extends string> {
  readonly labels: LabelValues<L>;
  /** The labels of each bucket's sample, `le` included, then the +Inf bucket's. */
  readonly bucketLabels: readonly LabelValues<L>[];
  readonly counts: number[];
  sum: number;
  count: number;
}

/**
 * prom-client's Histogram (its name, help, type, aggregation and registration), observed on the
 * request path into series it hands out once per label set, and read as their samples: prom-client
 * takes no recorded bucket counts, only one observation at a time.
 */
class SeriesHistogram<L extends string> extends Histogram<L> {
  readonly #series: HistogramSeries<L>[] = [];
  readonly #bounds: readonly number[];
  readonly #name: string;

  constructor(registry: Registry, name: string, help: string, labelNames: readonly L[], bounds: readonly number[]) {
    super({ name, help, labelNames, buckets: [...bounds], registers: [registry] });
    this.#bounds = bounds;
    this.#name = name;
  }

  series(labels: LabelValues<L>): HistogramSeries<L> {
    const bucketLabels = [...this.#bounds.map(String), '+Inf'].map((le): LabelValues<L> => Object.assign({}, labels, { le }));
    const series: HistogramSeries<L> = { labels, bucketLabels, counts: this.#bounds.map(() => 0), sum: 0, count: 0 };
    this.#series.push(series);
    return series;
  }

  record(series: HistogramSeries<L>, value: number): void {
    series.sum += value;
    series.count += 1;
    const bounds = this.#bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        series.counts[i]! += 1;
        return;
      }
    }
  }

  /** The samples, `le` among each bucket's labels: the JSON of a worker's registry, sent to the primary. */
  override get(): Promise<MetricObjectWithValues<MetricValueWithName<L>>> {
    return this.getForPromString();
  }

  /** The samples, as the registry renders them in the text format. */
  override async getForPromString(): Promise<MetricObjectWithValues<MetricValueWithName<L>>> {
    const values: MetricValueWithName<L>[] = [];
    const bucket = `${this.#name}_bucket`;
    for (const series of this.#series) {
      let cumulative = 0;
      series.counts.forEach((n, i) => {
        cumulative += n;
        values.push({ metricName: bucket, labels: series.bucketLabels[i]!, value: cumulative });
      });
      values.push({ metricName: bucket, labels: series.bucketLabels[series.counts.length]!, value: series.count });
      values.push({ metricName: `${this.#name}_sum`, labels: series.labels, value: series.sum });
      values.push({ metricName: `${this.#name}_count`, labels: series.labels, value: series.count });
    }
    return { ...(await super.getForPromString()), values };
  }

  override reset(): void {
    super.reset();
    if (!(#series in this)) return; // prom-client's constructor resets before this class's fields exist
    for (const series of this.#series) {
      series.counts.fill(0);
      series.sum = 0;
      series.count = 0;
    }
  }
}

type RequestLabel = 'method' | 'route' | 'status';
type DurationLabel = 'method' | 'route';

export class PrometheusMetrics implements Metrics {
  readonly registry = new Registry();
  private readonly requests: SeriesCounter<RequestLabel>;
  private readonly durations: SeriesHistogram<DurationLabel>;
  private readonly requestSeries = new Map<string, { count: CounterSeries<RequestLabel>; duration: HistogramSeries<DurationLabel> }>();
  /** By `<method> <route>`: one duration series for every status of a route. */
  private readonly durationSeries = new Map<string, HistogramSeries<DurationLabel>>();
  private readonly decisions = {} as Record<RateLimitScopeKind, Record<RateLimitOutcome, CounterSeries<'scope' | 'decision'>>>;
  private readonly failOpen: CounterSeries<never>;
  private readonly storeErrors: CounterSeries<never>;
  private readonly authFailures = {} as Record<AuthFailureReason, CounterSeries<'reason'>>;
  private readonly deliveries = {} as Record<WebhookDeliveryResult, CounterSeries<'result'>>;
  private outboxPending: (() => Promise<number>) | null = null;

  constructor() {
    const registry = this.registry;
    collectDefaultMetrics({ register: registry });
    this.requests = new SeriesCounter(
      registry,
      'cos_http_requests_total',
      'HTTP requests answered by the API, by method, route template (or "unmatched") and status ("aborted": the client hung up first).',
      ['method', 'route', 'status'],
    );
    this.durations = new SeriesHistogram(
      registry,
      'cos_http_request_duration_seconds',
      'Time from a request entering the API pipeline to its answer, by method and route template.',
      ['method', 'route'],
      HTTP_DURATION_BUCKETS,
    );
    const decisions = new SeriesCounter(
      registry,
      'cos_rate_limit_decisions_total',
      'Rate-limit decisions by scope (organisation, unauthenticated, source, secret_scanning, introspection) and decision (allowed, limited); a fail-open is allowed.',
      ['scope', 'decision'],
    );
    this.failOpen = new SeriesCounter(
      registry,
      'cos_rate_counter_fail_open_total',
      'Requests allowed without counting because the rate counter failed or did not answer in time (C-54).',
    ).series({});
    this.storeErrors = new SeriesCounter(
      registry,
      'cos_store_errors_total',
      'Store calls that failed because the database was unreachable, too slow or refused the connection (answered 503 on the API, C-17).',
    ).series({});
    const auth = new SeriesCounter(registry, 'cos_auth_failures_total', 'Requests refused with 401, by reason (missing, malformed, unknown_key, revoked, expired).', ['reason']);
    const deliveries = new SeriesCounter(registry, 'cos_webhook_deliveries_total', 'Webhook delivery attempts by result (delivered, retry, failed).', ['result']);
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
    for (const scope of RATE_LIMIT_SCOPE_KINDS) {
      const byDecision = {} as Record<RateLimitOutcome, CounterSeries<'scope' | 'decision'>>;
      for (const decision of RATE_LIMIT_OUTCOMES) byDecision[decision] = decisions.series({ scope, decision });
      this.decisions[scope] = byDecision;
    }
    for (const reason of AUTH_FAILURE_REASONS) this.authFailures[reason] = auth.series({ reason });
    for (const result of WEBHOOK_DELIVERY_RESULTS) this.deliveries[result] = deliveries.series({ result });
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
    let series = this.requestSeries.get(key);
    if (series === undefined) {
      series = { count: this.requests.series({ method, route, status: String(status) }), duration: this.#durationSeries(method, route) };
      this.requestSeries.set(key, series);
    }
    series.count.pending += 1;
    this.durations.record(series.duration, seconds);
  }

  #durationSeries(method: string, route: string): HistogramSeries<DurationLabel> {
    const key = `${method} ${route}`;
    let series = this.durationSeries.get(key);
    if (series === undefined) {
      series = this.durations.series({ method, route });
      this.durationSeries.set(key, series);
    }
    return series;
  }

  rateLimitDecision(scope: RateLimitScopeKind, decision: RateLimitOutcome): void {
    const series = this.decisions[scope]?.[decision];
    if (series !== undefined) series.pending += 1;
  }

  rateCounterFailOpen(): void {
    this.failOpen.pending += 1;
  }

  storeError(): void {
    this.storeErrors.pending += 1;
  }

  authFailure(reason: AuthFailureReason): void {
    const series = this.authFailures[reason];
    if (series !== undefined) series.pending += 1;
  }

  webhookDelivery(result: WebhookDeliveryResult): void {
    const series = this.deliveries[result];
    if (series !== undefined) series.pending += 1;
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
