/**
 * The key lifecycle through the real `cos-admin` binary on SQLite and Postgres: `serve` writes the
 * last_used_at of the requests it served when it gets SIGTERM (before the pools close; nothing was
 * written on the request path), `key roll` with --grace, `key list --unused-for` for stale keys, and
 * the api_key_rolled entry in `audit list`.
 */
import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import { createSqlStore } from '@cos/store-sql';
import { digestKey, keyPrefixOf } from '@cos/core';
import { ensureBuilt, type KeyView, type ServeProcess } from './support/cli.js';
import { databaseTargets, suiteDatabase } from './support/databases.js';

const DAY = 86_400_000;

before(async function () {
  this.timeout(180_000);
  await ensureBuilt();
});

for (const target of databaseTargets()) {
  describe(`cos-admin key lifecycle on ${target.name} (C-56, C-58)`, function () {
    this.timeout(90_000);
    const suite = suiteDatabase(target, { PORT: '0', RATE_LIMIT_PER_MINUTE: '1000000' });
    let orgId: string;

    before(async () => {
      await suite.json('migrate');
      orgId = (await suite.json<{ id: string }>('org', 'create', '--name', 'Acme', '--slug', 'acme')).id;
    });

    const keyList = async (...args: string[]): Promise<KeyView[]> => (await suite.json<{ data: KeyView[] }>('key', 'list', orgId, ...args)).data;

    it('serve writes last_used_at in the background: the first use at once, later uses batched (written on SIGTERM here), failed requests never', async () => {
      const used = await suite.json<KeyView>('key', 'issue', orgId, '--label', 'used');
      const revoked = await suite.json<KeyView>('key', 'issue', orgId, '--label', 'revoked');
      await suite.json('key', 'revoke', orgId, revoked.id);
      const s = suite.serve([]);
      const { url } = await s.listening();
      const get = (key: string): Promise<Response> => fetch(`${url}/v1/organisations/${orgId}`, { headers: { authorization: `Bearer ${key}` } });
      const firstBefore = Date.now();
      expect((await get(used.key!)).status).to.equal(200);
      const firstAfter = Date.now();
      // The first use after start is due at once (nothing written for it in the last minute).
      let firstWritten: string | null | undefined = null;
      for (let i = 0; i < 50 && firstWritten === null; i++) {
        await new Promise((r) => setTimeout(r, 100));
        firstWritten = (await keyList()).find((k) => k.id === used.id)?.last_used_at;
      }
      expect(firstWritten, 'the first use written in the background').to.be.a('string');
      expect(Date.parse(firstWritten!)).to.be.within(firstBefore - 1000, firstAfter + 1000);
      const before = Date.now();
      for (let i = 0; i < 4; i++) expect((await get(used.key!)).status).to.equal(200);
      expect((await get(revoked.key!)).status).to.equal(401);
      const after = Date.now();
      // Within the minute after that write, later uses wait for the next batch: one write per key per minute.
      expect((await keyList()).find((k) => k.id === used.id)?.last_used_at, 'batched, not one write per request').to.equal(firstWritten);
      s.child.kill('SIGTERM');
      expect(await s.exited(), s.stdout() + s.stderr()).to.deep.equal({ code: 0, signal: null });
      const listed = await keyList();
      const lastUsed = listed.find((k) => k.id === used.id)?.last_used_at;
      expect(lastUsed, 'written on SIGTERM').to.be.a('string');
      expect(Date.parse(lastUsed!)).to.be.within(before - 1000, after + 1000);
      expect(listed.find((k) => k.id === revoked.id)?.last_used_at).to.equal(null);
      const table = await suite.cli('key', 'list', orgId);
      expect(table.stdout).to.match(/LAST USED/);
      expect(table.stdout).to.include(lastUsed!);
    });

    it('SIGKILL: last_used_at is never more than KEY_USAGE_FLUSH_MS behind the last use, after a quiet period (used, written, quiet, used, killed 1 s later) as under steady use', async () => {
      const INTERVAL = 3_000; // KEY_USAGE_FLUSH_MS: the rule scaled down from the default minute
      const k = await suite.json<KeyView>('key', 'issue', orgId, '--label', 'killed');
      const lastUsedOf = async (): Promise<number | null> => {
        const v = (await keyList()).find((r) => r.id === k.id)?.last_used_at;
        return v === null || v === undefined ? null : Date.parse(v);
      };
      const serveHere = async (): Promise<{ s: ServeProcess; use: () => Promise<[number, number]> }> => {
        const s = suite.serve([], { KEY_USAGE_FLUSH_MS: String(INTERVAL) });
        const { url } = await s.listening();
        const use = async (): Promise<[number, number]> => {
          const before = Date.now();
          const res = await fetch(`${url}/v1/organisations/${orgId}`, { headers: { authorization: `Bearer ${k.key}` } });
          expect(res.status).to.equal(200);
          return [before, Date.now()];
        };
        return { s, use };
      };
      const kill = async (s: ServeProcess): Promise<void> => {
        s.child.kill('SIGKILL');
        expect((await s.exited()).signal).to.equal('SIGKILL');
      };

      // Used (and written: the first use since start is due at once), quiet for longer than the
      // interval, used again, SIGKILLed a second later: the second use is the one stored.
      const first = await serveHere();
      const [a0, a1] = await first.use();
      let stored: number | null = null;
      for (let i = 0; i < 50 && stored === null; i++) {
        await new Promise((r) => setTimeout(r, 100));
        stored = await lastUsedOf();
      }
      expect(stored, 'the first use written in the background').to.be.within(a0 - 1, a1 + 1);
      await new Promise((r) => setTimeout(r, INTERVAL + 1_000));
      const [b0, b1] = await first.use();
      await new Promise((r) => setTimeout(r, 1_000));
      await kill(first.s);
      expect(await lastUsedOf(), 'the use after the quiet period, written before the kill').to.be.within(b0 - 1, b1 + 1);

      // Steady use (a request every 100 ms for two intervals), SIGKILLed right after the last one:
      // the stored value is at most the interval behind it.
      const second = await serveHere();
      const until = Date.now() + 2 * INTERVAL;
      let last: [number, number] = await second.use();
      while (Date.now() < until) {
        last = await second.use();
        await new Promise((r) => setTimeout(r, 100));
      }
      await kill(second.s);
      const afterSteady = (await lastUsedOf())!;
      expect(afterSteady, 'at most the interval behind the last use').to.be.at.least(last[1] - INTERVAL);
      expect(afterSteady).to.be.at.most(last[1] + 1);
    });

    it('key roll --grace 24h: a new key (same label and environment) shown once; the old one ends in 24 h; a second roll is refused', async () => {
      const old = await suite.json<KeyView>('key', 'issue', orgId, '--label', 'deploy', '--test');
      const start = Date.now();
      const rolled = await suite.json<KeyView>('key', 'roll', orgId, old.id, '--grace', '24h');
      expect(rolled).to.include({ rolled_from: old.id, label: 'deploy', status: 'active', last_used_at: null });
      expect(rolled.key).to.match(/^svc_test_[A-Za-z0-9]{48}$/);
      const oldNow = (await keyList()).find((k) => k.id === old.id)!;
      expect(oldNow.status).to.equal('active');
      expect(Date.parse(oldNow.expires_at!)).to.be.within(start + DAY - 1000, Date.now() + DAY + 1000);
      const again = await suite.cli('key', 'roll', orgId, old.id);
      expect(again.code).to.not.equal(0);
      expect(again.stderr.trim().split('\n')).to.have.length(1);
      expect(again.stderr).to.match(/already been rolled/);
      const human = await suite.cli('key', 'roll', orgId, rolled.id, '--label', 'deploy 2');
      expect(human.code, human.stderr).to.equal(0);
      expect(human.stdout).to.match(/Rolled API key .* \(old key: revoked\)/);
      expect(human.stdout).to.match(/rolled from:\s+[0-9a-f-]{36}/);
      const bad = await suite.cli('key', 'roll', orgId, old.id, '--grace', '24x');
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.match(/option '--grace <duration>' argument '24x' is invalid/);
      const audit = await suite.cli('audit', 'list', '--org', orgId, '--kind', 'api_key_rolled');
      expect(audit.stdout).to.include(`rolled to ${rolled.id}, grace 86400s`);
      const auditJson = await suite.json<{ data: { key_id: string; roll?: unknown }[] }>('audit', 'list', '--org', orgId, '--kind', 'api_key_rolled');
      expect(auditJson.data.find((e) => e.key_id === old.id)?.roll).to.deep.equal({ to_key_id: rolled.id, grace_period_seconds: 86_400 });
    });

    it('key list --unused-for 90d: active keys last used, or (never used) created, more than 90 days ago', async () => {
      const store = createSqlStore({ databaseUrl: suite.db.databaseUrl });
      const now = Date.now();
      const insert = async (label: string, createdAt: number, extra: { revokedAt?: number } = {}): Promise<string> => {
        const raw = `svc_live_${randomBytes(36).toString('base64').replace(/[^A-Za-z0-9]/g, 'A').slice(0, 48)}`;
        const id = randomUUID();
        await store.stores.apiKeys.insert({
          id,
          organisationId: orgId,
          label,
          keyPrefix: keyPrefixOf(raw),
          digest: digestKey(raw),
          expiresAt: null,
          createdAt: new Date(createdAt),
          revokedAt: extra.revokedAt === undefined ? null : new Date(extra.revokedAt),
        });
        return id;
      };
      try {
        const neverUsedOld = await insert('stale never used', now - 120 * DAY);
        const usedLongAgo = await insert('stale used', now - 200 * DAY);
        const usedRecently = await insert('fresh used', now - 200 * DAY);
        const newNeverUsed = await insert('new', now - DAY);
        const revokedOld = await insert('revoked', now - 200 * DAY, { revokedAt: now - 150 * DAY });
        await store.stores.apiKeys.recordUses([
          { keyId: usedLongAgo, at: new Date(now - 100 * DAY) },
          { keyId: usedRecently, at: new Date(now - 10 * DAY) },
        ]);
        const stale = (await keyList('--unused-for', '90d')).map((k) => k.id);
        expect(stale).to.include.members([neverUsedOld, usedLongAgo]);
        for (const id of [usedRecently, newNeverUsed, revokedOld]) expect(stale).to.not.include(id);
        const bad = await suite.cli('key', 'list', orgId, '--unused-for', 'soon');
        expect(bad.code).to.equal(2);
        expect(bad.stderr).to.match(/option '--unused-for <duration>' argument 'soon' is invalid/);
      } finally {
        await store.close();
      }
    });
  });
}
