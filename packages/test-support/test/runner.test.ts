/**
 * The parallel test run's setup (lib/runner/): disjoint topology ports per worker, the reason given
 * for a skipped test, and the per-worker Postgres databases (on TEST_DATABASE_URL, required under
 * CI=true).
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import { createDatabases } from '../lib/runner/postgres.js';
import { skipReason, topologyRanges } from '../lib/runner/slots.js';

describe('test run setup: per-worker slots', () => {
  it('splits the topology ports into disjoint slices of at least 12, one per worker, inside the range', () => {
    expect(topologyRanges(4)).to.deep.equal(['7100-7124', '7125-7149', '7150-7174', '7175-7199']);
    expect(topologyRanges(1, '8000-8011')).to.deep.equal(['8000-8011']);
    expect(() => topologyRanges(9)).to.throw(/too small for 9 workers/);
  });

  it('names why a test was skipped, from its file and titles and the environment', () => {
    const none = {};
    expect(skipReason('/r/packages/store-sql/test/x.test.ts', 'Postgres suite needs TEST_DATABASE_URL (skipped outside CI)', none)).to.equal('Postgres: no TEST_DATABASE_URL');
    expect(skipReason('/r/packages/limiter-redis/test/contract.test.ts', 'RateCounter contract: redis (TEST_REDIS_URL) runs when TEST_REDIS_URL is set', none)).to.equal('Redis: no TEST_REDIS_URL');
    expect(skipReason('/r/packages/limiter-redis/test/faults.test.ts', 'faults needs redis-server on PATH (skipped outside CI)', none)).to.equal('redis-server / redis-cli not on the PATH');
    expect(skipReason('/r/packages/core/test/x.test.ts', 'a suite without data', none)).to.equal('skipped by the test itself');
    expect(skipReason('/r/x.test.ts', 'on Postgres', { TEST_DATABASE_URL: 'postgres://h/db' })).to.equal('Postgres (TEST_DATABASE_URL is set)');
  });
});

describe('test run setup: per-worker Postgres databases', function () {
  const url = process.env['TEST_DATABASE_URL'];
  if (url === undefined || url === '') {
    if (process.env['CI'] === 'true') it('needs TEST_DATABASE_URL (CI=true: this must not be skipped)', () => expect.fail('TEST_DATABASE_URL is not set'));
    else it('needs TEST_DATABASE_URL (skipped outside CI)');
    return;
  }

  it('creates <database>_w<n>, once: a second run finds it and creates nothing', async () => {
    // A base name of its own: the worker database made here is this test's alone.
    const base = `cos_runner_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      const urls = await createDatabases(url, 1, base);
      expect(urls.map((u) => new URL(u).pathname)).to.deep.equal([`/${base}_w0`]);
      expect(await createDatabases(url, 1, base)).to.deep.equal(urls);
      const c = new pg.Client({ connectionString: urls[0]! });
      await c.connect();
      expect((await c.query<{ db: string }>('SELECT current_database() AS db')).rows[0]!.db).to.equal(`${base}_w0`);
      await c.end();
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS "${base}_w0"`);
      await admin.end();
    }
  });
});
