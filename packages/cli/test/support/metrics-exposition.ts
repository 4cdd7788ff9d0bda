/**
 * A fixed set of recordings through PrometheusMetrics and PrimaryMetrics, and the service's own lines
 * of the exposition they give (process metrics, whose values vary, left out): what
 * fixtures/metrics-exposition.txt holds, so a change of the metric engine shows in the text itself.
 */
import { PrimaryMetrics, createPrometheusMetrics, type PrometheusMetrics } from '../../src/metrics.js';

/** Only the service's own metrics: every line naming a cos_ metric, HELP and TYPE included. */
export function serviceLines(text: string): string {
  return text
    .split('\n')
    .filter((l) => /^(# (HELP|TYPE) )?cos_/.test(l))
    .join('\n');
}

function record(m: PrometheusMetrics, worker: number): void {
  const routes = ['/v1/organisations', '/v1/organisations/:org_id', '/v1/organisations/:org_id/api-keys', 'unmatched'];
  const seconds = [0.0004, 0.001, 0.0012, 0.003, 0.007, 0.02, 0.04, 0.2, 0.7, 1.5, 3, 12];
  for (let i = 0; i < 60 + worker; i++) {
    const status = i % 7 === 0 ? 'aborted' : [200, 201, 404, 429, 503][i % 5]!;
    m.httpRequest(['GET', 'POST', 'DELETE'][i % 3]!, routes[i % 4]!, status, seconds[i % 12]!);
  }
  m.rateLimitDecision('organisation', 'allowed');
  m.rateLimitDecision('source', 'limited');
  m.rateLimitDecision('secret_scanning', 'allowed');
  m.rateCounterFailOpen();
  m.storeError();
  m.storeError();
  m.authFailure('scanner_bad_signature');
  m.authFailure('missing');
  m.webhookDelivery('retry');
  m.webhookDelivery('delivered');
}

/** The exposition of one instance (scraped twice, recording between) and of a two-worker `serve`. */
export async function fixedExposition(): Promise<string> {
  const single = createPrometheusMetrics();
  single.observeOutbox(async () => 7);
  record(single, 0);
  const first = await single.render();
  record(single, 1);
  const second = await single.render();

  const workers = [createPrometheusMetrics(), createPrometheusMetrics()];
  workers.forEach((w, i) => {
    w.observeOutbox(async () => 3);
    record(w, i + 2);
  });
  const primary = new PrimaryMetrics();
  primary.workers(2);
  primary.workersReady(2);
  primary.restarted(2);
  const merged = await primary.render(await Promise.all(workers.map(async (w, i) => ({ slot: i + 1, metrics: await w.registry.getMetricsAsJSON() }))));
  return ['# one instance, first scrape', serviceLines(first), '# second scrape', serviceLines(second), '# serve, two workers', serviceLines(merged), ''].join('\n');
}
