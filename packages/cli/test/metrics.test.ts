/**
 * PrometheusMetrics (the Metrics port on prom-client) rendered as the Prometheus text
 * format: TYPE lines, cumulative histogram buckets, the closed label sets present at 0, and the
 * outbox gauge read at scrape time (left alone when the store does not answer).
 */
import { expect } from 'chai';
import { createPrometheusMetrics } from '../src/metrics.js';

function line(text: string, prefix: string): string | undefined {
  return text.split('\n').find((l) => l.startsWith(prefix));
}

describe('PrometheusMetrics (cli)', () => {
  it('renders counters and a histogram with cumulative buckets, +Inf, _sum and _count, per route template', async () => {
    const m = createPrometheusMetrics();
    m.httpRequest('GET', '/v1/organisations/:org_id', 200, 0.0005);
    m.httpRequest('GET', '/v1/organisations/:org_id', 200, 0.003);
    m.httpRequest('GET', '/v1/organisations/:org_id', 404, 20);
    m.httpRequest('POST', '/v1/organisations', 'aborted', 0.2);
    const text = await m.render();
    expect(text).to.include('# TYPE cos_http_requests_total counter');
    expect(text).to.include('# TYPE cos_http_request_duration_seconds histogram');
    expect(line(text, 'cos_http_requests_total{method="GET",route="/v1/organisations/:org_id",status="200"}')).to.match(/ 2$/);
    expect(line(text, 'cos_http_requests_total{method="GET",route="/v1/organisations/:org_id",status="404"}')).to.match(/ 1$/);
    expect(line(text, 'cos_http_requests_total{method="POST",route="/v1/organisations",status="aborted"}')).to.match(/ 1$/);
    const bucket = (le: string) => line(text, `cos_http_request_duration_seconds_bucket{method="GET",route="/v1/organisations/:org_id",le="${le}"}`);
    expect(bucket('0.001')).to.match(/ 1$/);
    expect(bucket('0.0025')).to.match(/ 1$/);
    expect(bucket('0.005')).to.match(/ 2$/);
    expect(bucket('10')).to.match(/ 2$/);
    expect(bucket('+Inf')).to.match(/ 3$/);
    expect(Number(line(text, 'cos_http_request_duration_seconds_sum{method="GET",route="/v1/organisations/:org_id"}')!.split(' ')[1])).to.be.closeTo(20.0035, 1e-9);
    expect(line(text, 'cos_http_request_duration_seconds_count{method="GET",route="/v1/organisations/:org_id"}')).to.match(/ 3$/);
  });

  it('exposes every value of the closed label sets from the start, and counts them', async () => {
    const m = createPrometheusMetrics();
    let text = await m.render();
    expect(line(text, 'cos_rate_limit_decisions_total{scope="secret_scanning",decision="limited"}')).to.match(/ 0$/);
    expect(line(text, 'cos_auth_failures_total{reason="expired"}')).to.match(/ 0$/);
    expect(line(text, 'cos_webhook_deliveries_total{result="retry"}')).to.match(/ 0$/);
    expect(line(text, 'cos_rate_counter_fail_open_total')).to.equal('cos_rate_counter_fail_open_total 0');
    expect(line(text, 'cos_store_errors_total')).to.equal('cos_store_errors_total 0');
    m.rateLimitDecision('organisation', 'limited');
    m.rateLimitDecision('organisation', 'limited');
    m.rateCounterFailOpen();
    m.storeError();
    m.authFailure('revoked');
    m.webhookDelivery('failed');
    text = await m.render();
    expect(line(text, 'cos_rate_limit_decisions_total{scope="organisation",decision="limited"}')).to.match(/ 2$/);
    expect(line(text, 'cos_rate_counter_fail_open_total')).to.equal('cos_rate_counter_fail_open_total 1');
    expect(line(text, 'cos_store_errors_total')).to.equal('cos_store_errors_total 1');
    expect(line(text, 'cos_auth_failures_total{reason="revoked"}')).to.match(/ 1$/);
    expect(line(text, 'cos_webhook_deliveries_total{result="failed"}')).to.match(/ 1$/);
    expect(text).to.match(/^process_cpu_user_seconds_total /m);
  });

  it('cos_webhook_outbox_pending is read at scrape time; a store that fails leaves the last value', async () => {
    const m = createPrometheusMetrics();
    let depth: number | Error = 7;
    m.observeOutbox(() => (depth instanceof Error ? Promise.reject(depth) : Promise.resolve(depth)));
    expect(line(await m.render(), 'cos_webhook_outbox_pending')).to.equal('cos_webhook_outbox_pending 7');
    depth = 3;
    expect(line(await m.render(), 'cos_webhook_outbox_pending')).to.equal('cos_webhook_outbox_pending 3');
    depth = new Error('ECONNREFUSED');
    expect(line(await m.render(), 'cos_webhook_outbox_pending')).to.equal('cos_webhook_outbox_pending 3');
  });
});
