/**
 * The /metrics exposition is a contract with every dashboard and alert built on it: for a fixed set of
 * recordings the service's own lines (names, labels and their order, HELP, TYPE, buckets, values) of
 * one instance and of a two-worker `serve` are exactly those of fixtures/metrics-exposition.txt.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { fixedExposition } from './support/metrics-exposition.js';

describe('PrometheusMetrics exposition (cli)', () => {
  it('renders exactly the recorded exposition: names, labels, HELP and TYPE, buckets, values, one instance and two workers', async () => {
    const expected = readFileSync(new URL('./fixtures/metrics-exposition.txt', import.meta.url), 'utf8');
    expect(await fixedExposition()).to.equal(expected);
  });
});
