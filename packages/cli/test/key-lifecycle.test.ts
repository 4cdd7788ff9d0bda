/**
 * Issue 16 through the real `cos-admin` binary on SQLite and Postgres: `serve` writes the
 * last_used_at of the requests it served when it gets SIGTERM (before the pools close; nothing was
 * written on the request path), `key roll` with --grace, `key list --unused-for` for stale keys, and
 * the api_key_rolled entry in `audit list`.
 */
import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import { createSqlStore } from '@cos/store-sql';
import { digestKey, keyPrefixOf } from '@cos/core';
import { cliJson, ensureBuilt, runCli, startServe, type Env, type ServeProcess } from './support/cli.js';
import { databaseTargets, type TestDatabase } from './support/databases.js';

const DAY = 86_400_000;

before(async function () {
  this.timeout(180_000);
  await ensureBuilt();
});

interface KeyView {
  id: string;
  key?: string;
  label: string;
  status: string;
  expires_at: string | null;
  last_used_at: string | null;
  rolled_from: string | null;
}

for (const target of databaseTargets()) {
  describe(`cos-admin key lifecycle on ${target.name} (issue 16)`, function () {
    this.timeout(90_000);
    let db: TestDatabase;
    let env: Env;
    let orgId: string;
    const servers: ServeProcess[] = [];

    before(async () => {
      db = await target.create();
      env = { DATABASE_URL: db.databaseUrl, PORT: '0', RATE_LIMIT_PER_MINUTE: '1000000' };
      await cliJson(['migrate'], env, db.cwd);
      orgId = (await cliJson<{ id: string }>(['org', 'create', '--name', 'Acme', '--slug', 'acme'], env, db.cwd)).id;
    });
    afterEach(() => {
      for (const s of servers.splice(0)) s.kill();
    });
    after(async () => {
      await db?.drop();
    });

    const keyList = async (...args: string[]): Promise<KeyView[]> => (await cliJson<{ data: KeyView[] }>(['key', 'list', orgId, ...args], env, db.cwd)).data;

    it('serve writes last_used_at in the background: the first use at once, later uses batched (written on SIGTERM here), failed requests never', async () => {
      const used = await cliJson<KeyView>(['key', 'issue', orgId, '--label', 'used'], env, db.cwd);
      const revoked = await cliJson<KeyView>(['key', 'issue', orgId, '--label', 'revoked'], env, db.cwd);
      await cliJson(['key', 'revoke', orgId, revoked.id], env, db.cwd);
      const s = startServe([], env, db.cwd);
      servers.push(s);
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
      const table = await runCli(['key', 'list', orgId], env, db.cwd);
      expect(table.stdout).to.match(/LAST USED/);
      expect(table.stdout).to.include(lastUsed!);
    });

    it('key roll --grace 24h: a new key (same label and environment) shown once; the old one ends in 24 h; a second roll is refused', async () => {
      const old = await cliJson<KeyView>(['key', 'issue', orgId, '--label', 'deploy', '--test'], env, db.cwd);
      const start = Date.now();
      const rolled = await cliJson<KeyView>(['key', 'roll', orgId, old.id, '--grace', '24h'], env, db.cwd);
      expect(rolled).to.include({ rolled_from: old.id, label: 'deploy', status: 'active', last_used_at: null });
      expect(rolled.key).to.match(/^svc_test_[A-Za-z0-9]{48}$/);
      const oldNow = (await keyList()).find((k) => k.id === old.id)!;
      expect(oldNow.status).to.equal('active');
      expect(Date.parse(oldNow.expires_at!)).to.be.within(start + DAY - 1000, Date.now() + DAY + 1000);
      const again = await runCli(['key', 'roll', orgId, old.id], env, db.cwd);
      expect(again.code).to.not.equal(0);
      expect(again.stderr.trim().split('\n')).to.have.length(1);
      expect(again.stderr).to.match(/already been rolled/);
      const human = await runCli(['key', 'roll', orgId, rolled.id, '--label', 'deploy 2'], env, db.cwd);
      expect(human.code, human.stderr).to.equal(0);
      expect(human.stdout).to.match(/Rolled API key .* \(old key: revoked\)/);
      expect(human.stdout).to.match(/rolled from:\s+[0-9a-f-]{36}/);
      const bad = await runCli(['key', 'roll', orgId, old.id, '--grace', '24x'], env, db.cwd);
      expect(bad.code).to.not.equal(0);
      expect(bad.stderr).to.match(/invalid --grace/);
      const audit = await runCli(['audit', 'list', '--org', orgId, '--kind', 'api_key_rolled'], env, db.cwd);
      expect(audit.stdout).to.include(`rolled to ${rolled.id}, grace 86400s`);
      const auditJson = await cliJson<{ data: { key_id: string; roll?: unknown }[] }>(['audit', 'list', '--org', orgId, '--kind', 'api_key_rolled'], env, db.cwd);
      expect(auditJson.data.find((e) => e.key_id === old.id)?.roll).to.deep.equal({ to_key_id: rolled.id, grace_period_seconds: 86_400 });
    });

    it('key list --unused-for 90d: active keys last used, or (never used) created, more than 90 days ago', async () => {
      const store = createSqlStore({ databaseUrl: db.databaseUrl });
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
        const bad = await runCli(['key', 'list', orgId, '--unused-for', 'soon'], env, db.cwd);
        expect(bad.code).to.not.equal(0);
        expect(bad.stderr).to.match(/invalid --unused-for/);
      } finally {
        await store.close();
      }
    });
  });
}
