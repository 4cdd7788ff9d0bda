/**
 * The sweep of expired Idempotency-Key answers, a background worker of the core as the outbox's
 * retention is: it sweeps at start and then periodically, logs what it deleted, and stops cleanly.
 * On the real in-memory store.
 */
import { expect } from 'chai';
import { DEFAULT_IDEMPOTENCY_SWEEP_INTERVAL_MS, IdempotencySweep } from '@cos/core';
import { CapturingLogger } from '@cos/core/testing';
import { fixture } from './use-cases-fixtures.js';

const HOUR = 60 * 60 * 1000;

describe('worker: the idempotency key sweep', () => {
  it('sweeps the expired answers at start, logs how many it deleted, keeps the live ones, and stops cleanly', async () => {
    const f = fixture();
    const { principal } = await f.tenant('acme');
    const keep = async (key: string): Promise<void> => {
      const started = await f.core.idempotency.begin(principal, key, { method: 'POST', path: '/v1/things', body: { key } });
      if (started.kind !== 'started') throw new Error(`${key} was not started`);
      await f.core.idempotency.finish(started.ticket, { status: 201, headers: { 'content-type': 'application/json' }, body: '{}' });
    };
    await keep('old-1');
    await keep('old-2');
    f.clock.advance(23 * HOUR);
    await keep('recent');
    f.clock.advance(2 * HOUR);
    expect(f.core.idempotencySweep.intervalMs, 'the core builds one, every 15 minutes by default').to.equal(DEFAULT_IDEMPOTENCY_SWEEP_INTERVAL_MS);
    const logger = new CapturingLogger();
    const sweep = new IdempotencySweep({ idempotency: f.core.idempotency, logger, intervalMs: 60_000 });
    sweep.start();
    for (let i = 0; i < 200 && logger.entries.length === 0; i += 1) await new Promise((r) => setTimeout(r, 10));
    await sweep.stop();
    expect(logger.entries.map((l) => [l.level, l.message, l.fields['swept']])).to.deep.equal([['info', 'expired idempotency keys deleted', 2]]);
    expect(await sweep.sweepOnce(), 'nothing expired is left; the recent answer is kept').to.equal(0);
    const replay = await f.core.idempotency.begin(principal, 'recent', { method: 'POST', path: '/v1/things', body: { key: 'recent' } });
    expect(replay.kind).to.equal('replay');
  });
});
