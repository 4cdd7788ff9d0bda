/**
 * `cos-admin org limit show|set` (C-240, C-241) run in process on SQLite and Postgres: the default,
 * an organisation's own limit and back, the audit entry with its old and new value (in --json and in
 * the text listing), and the limit an authenticated request is then counted against.
 */
import { expect } from 'chai';
import { createCore, InProcessRateCounter } from '@cos/core';
import { createSqlStore } from '@cos/store-sql';
import { databaseTargets, suiteDatabase } from './support/databases.js';

for (const target of databaseTargets()) {
  describe(`cos-admin org limit on ${target.name} (C-240, C-241)`, function () {
    this.timeout(90_000);
    const suite = suiteDatabase(target);
    let orgId: string;

    before(async () => {
      await suite.json('migrate');
      orgId = (await suite.json<{ id: string }>('org', 'create', '--name', 'Planned', '--slug', 'planned')).id;
    });

    it('C-240, C-241: show answers the default; set gives the organisation its own limit and default returns it; each change is audited with old and new; the same value again writes nothing', async () => {
      expect(await suite.json('org', 'limit', 'show', orgId)).to.deep.equal({ requests_per_minute: 60, source: 'default' });
      expect(await suite.json('org', 'limit', 'set', orgId, '--per-minute', '600')).to.deep.equal({ requests_per_minute: 600, source: 'organisation' });
      expect(await suite.json('org', 'limit', 'set', orgId, '--per-minute', '600')).to.deep.equal({ requests_per_minute: 600, source: 'organisation' });
      const human = await suite.cli('org', 'limit', 'show', orgId);
      expect(human.code, human.stderr).to.equal(0);
      expect(human.stdout).to.match(/requests per minute:\s+600\n/);
      expect(human.stdout).to.match(/source:\s+the organisation's own limit\n/);

      // The limit a request of the organisation is counted against, read with its key.
      const key = await suite.json<{ key: string }>('key', 'issue', orgId, '--label', 'reader');
      const store = createSqlStore({ databaseUrl: suite.db.databaseUrl });
      try {
        const core = createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter: new InProcessRateCounter() });
        const admitted = await core.admission.admit(`Bearer ${key.key}`, '203.0.113.9');
        expect(admitted.admitted && admitted.decision).to.deep.include({ allowed: true, limit: 600, remaining: 599 });
      } finally {
        await store.close();
      }

      expect(await suite.json('org', 'limit', 'set', orgId, '--per-minute', 'default')).to.deep.equal({ requests_per_minute: 60, source: 'default' });
      const entries = await suite.json<{ data: Array<{ kind: string; actor: { type: string }; rate_limit?: unknown }> }>(
        'audit', 'list', '--org', orgId, '--kind', 'organisation_rate_limit_changed',
      );
      expect(entries.data.map((e) => e.rate_limit)).to.deep.equal([
        { old: null, new: 600 },
        { old: 600, new: null },
      ]);
      expect(entries.data.every((e) => e.actor.type === 'operator')).to.equal(true);
      const listed = await suite.cli('audit', 'list', '--org', orgId, '--kind', 'organisation_rate_limit_changed');
      expect(listed.stdout).to.include('rate limit default -> 600/min');
      expect(listed.stdout).to.include('rate limit 600/min -> default');
    });

    it('C-241: an organisation that does not exist is not found (exit 1) and nothing is written', async () => {
      const missing = '3f1c9a52-8d4e-4b7a-9c21-5e6f7a8b9c0d';
      const r = await suite.cli('org', 'limit', 'set', missing, '--per-minute', '5');
      expect(r.code).to.equal(1);
      expect(r.stderr).to.match(/not found/i);
      expect((await suite.cli('org', 'limit', 'show', missing)).code).to.equal(1);
    });
  });
}
