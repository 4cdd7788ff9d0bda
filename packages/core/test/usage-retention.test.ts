/**
 * UsageRetention (USAGE_RETENTION) over the in-memory store with a FakeClock: the hours that started
 * longer ago than the retention are deleted at start, the others kept; a failing purge is logged
 * and retried at the next interval, never thrown.
 */
import { expect } from 'chai';
import { DEFAULT_USAGE_RETENTION_MS, OPERATOR, UsageRetention } from '@cos/core';
import { CapturingLogger, createTestCore } from '@cos/core/testing';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('core: UsageRetention', () => {
  it('purges the hours older than the retention at start, logs how many, keeps the rest, and stops cleanly', async () => {
    const tc = createTestCore();
    const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    const key = await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'k' });
    const now = tc.clock.now().getTime();
    const hour = (ago: number): Date => new Date(now - ago - ((now - ago) % HOUR));
    await tc.store.stores.usage.add([
      { keyId: key.key.id, hourStart: hour(91 * DAY), requests: 1, rateLimited: 0 },
      { keyId: key.key.id, hourStart: hour(95 * DAY), requests: 2, rateLimited: 1 },
      { keyId: key.key.id, hourStart: hour(89 * DAY), requests: 3, rateLimited: 0 },
    ]);
    const logger = new CapturingLogger();
    const retention = new UsageRetention({ usage: tc.store.stores.usage, clock: tc.clock, logger, retentionMs: DEFAULT_USAGE_RETENTION_MS });
    expect(DEFAULT_USAGE_RETENTION_MS).to.equal(90 * DAY);
    expect(retention.intervalMs, 'hourly, for a retention longer than an hour').to.equal(HOUR);
    retention.start();
    for (let i = 0; i < 200 && logger.entries.length === 0; i += 1) await new Promise((r) => setTimeout(r, 10));
    await retention.stop();
    expect(logger.entries.map((l) => [l.level, l.message, l.fields['purged']])).to.deep.equal([['info', 'purged usage counts past their retention', 2]]);
    const left = await tc.core.usage.ofKey(OPERATOR, org.id, key.key.id, { granularity: 'day', since: new Date(now - 100 * DAY).toISOString() });
    expect(left.map((b) => b.requests), 'only the hour 89 days old is left').to.deep.equal([3]);
  });

  it('a failing purge is logged at warn and never thrown', async () => {
    const tc = createTestCore();
    const logger = new CapturingLogger();
    const failing = { purge: () => Promise.reject(new Error('database unavailable')) };
    const retention = new UsageRetention({ usage: failing, clock: tc.clock, logger, retentionMs: DAY, intervalMs: 60_000 });
    retention.start();
    for (let i = 0; i < 200 && logger.entries.length === 0; i += 1) await new Promise((r) => setTimeout(r, 10));
    await retention.stop();
    expect(logger.entries.map((l) => [l.level, l.message, l.fields['err']])).to.deep.equal([
      ['warn', 'usage counts purge failed; trying again at the next interval', 'database unavailable'],
    ]);
  });
});
