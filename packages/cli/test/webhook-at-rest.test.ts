/**
 * Through real `cos-admin` processes on SQLite and Postgres: webhook endpoint changes and retries
 * are audited with the `--actor` name; signing secrets are stored encrypted under
 * WEBHOOK_SECRET_ENCRYPTION_KEY (read straight from the database), `serve` signs with them, the key
 * rotates with WEBHOOK_SECRET_PREVIOUS_KEYS and `org webhook reencrypt-secrets`, and a wrong key is
 * a clear last_error; delivered and failed notifications are purged by `notifications purge` and by
 * `serve` after NOTIFICATION_RETENTION, pending ones never.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import { webhookSecretKeyId } from '@cos/core';
import { cliJson, ensureBuilt, runCli, startServe, type Env, type ServeProcess } from './support/cli.js';
import { databaseTargets, type TestDatabase } from './support/databases.js';
import { startReceiver, type Receiver } from './support/scanner.js';

const DAY = 24 * 60 * 60 * 1000;
const KEY_A = randomBytes(32);
const KEY_B = randomBytes(32);
const KEY_C = randomBytes(32);

interface AuditRecord {
  kind: string;
  actor: { type: string; name?: string };
  organisation_id: string;
  webhook?: { origin: string };
  notification?: { id: string; type: string };
}

interface NotificationRecord {
  id: string;
  status: string;
  attempts: number;
  last_error: string | null;
  completed_at: string | null;
}

for (const target of databaseTargets()) {
  describe(`webhooks at rest, outbox retention and webhook audit through cos-admin on ${target.name} (C-59)`, function () {
    this.timeout(120_000);
    let db: TestDatabase | undefined;
    let direct: SqlStore | undefined;
    const servers: ServeProcess[] = [];
    const receivers: Receiver[] = [];

    before(ensureBuilt);

    afterEach(async () => {
      for (const s of servers.splice(0)) s.kill();
      await Promise.all(receivers.splice(0).map((r) => r.close()));
      await direct?.close();
      direct = undefined;
      await db?.drop();
      db = undefined;
    });

    /** A migrated database with one organisation; `env` is its base environment. */
    async function prepare(extra: Env = {}): Promise<{ env: Env; cwd: string; orgId: string; sql: SqlStore }> {
      db = await target.create();
      // Local receivers on http://127.0.0.1 are opted in explicitly (they are refused by default).
      const env: Env = {
        DATABASE_URL: db.databaseUrl,
        PORT: '0',
        WEBHOOK_POLL_INTERVAL_MS: '50',
        WEBHOOK_RETRY_BASE_MS: '100',
        WEBHOOK_TIMEOUT_MS: '1000',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        ...extra,
      };
      await cliJson(['migrate'], env, db.cwd);
      const org = await cliJson<{ id: string }>(['org', 'create', '--name', 'Acme', '--slug', 'acme'], env, db.cwd);
      direct = createSqlStore({ databaseUrl: db.databaseUrl, poolMax: 1 });
      return { env, cwd: db.cwd, orgId: org.id, sql: direct };
    }

    async function serve(env: Env, cwd: string): Promise<ServeProcess> {
      const p = startServe([], env, cwd);
      servers.push(p);
      await p.listening();
      return p;
    }

    async function stop(p: ServeProcess): Promise<void> {
      p.child.kill('SIGTERM');
      await p.exited();
    }

    async function storedSecret(sql: SqlStore, orgId: string): Promise<string> {
      const rows = (await sql.knex('webhook_endpoints').select('secret').where('organisation_id', orgId)) as Array<{ secret: string }>;
      return rows[0]!.secret;
    }

    async function notifications(env: Env, cwd: string): Promise<NotificationRecord[]> {
      return (await cliJson<{ data: NotificationRecord[] }>(['notifications', 'list', '--limit', '100'], env, cwd)).data;
    }

    it('C-40: org webhook set / rotate-secret / remove and notifications retry write their entries with the --actor name and the endpoint origin only', async () => {
      const { env, cwd, orgId } = await prepare();
      const set = await cliJson<{ secret: string }>(
        ['org', 'webhook', 'set', orgId, '--url', 'https://hooks.acme.example:8443/services/T0/PATHTOKEN?sig=QUERYTOKEN', '--actor', 'alice'],
        env,
        cwd,
      );
      await cliJson(['key', 'issue', orgId, '--label', 'ci'], env, cwd);
      const rotated = await cliJson<{ secret: string }>(['--actor', 'bob', 'org', 'webhook', 'rotate-secret', orgId], env, cwd);
      const [pending] = await notifications(env, cwd);
      await cliJson(['notifications', 'retry', pending!.id, '--actor', 'carol'], env, cwd);
      await cliJson(['org', 'webhook', 'remove', orgId, '--actor', 'alice'], env, cwd);

      const audit = await cliJson<{ data: AuditRecord[] }>(['audit', 'list', '--org', orgId, '--limit', '100'], env, cwd);
      const ours = audit.data.filter((e) => e.kind.startsWith('webhook_') || e.kind === 'notification_retried');
      expect(ours.map((e) => [e.kind, e.actor, e.webhook ?? null, e.notification ?? null])).to.deep.equal([
        ['webhook_endpoint_set', { type: 'operator', name: 'alice' }, { origin: 'https://hooks.acme.example:8443' }, null],
        ['webhook_secret_rotated', { type: 'operator', name: 'bob' }, { origin: 'https://hooks.acme.example:8443' }, null],
        ['notification_retried', { type: 'operator', name: 'carol' }, null, { id: pending!.id, type: 'api_key.issued' }],
        ['webhook_endpoint_removed', { type: 'operator', name: 'alice' }, { origin: 'https://hooks.acme.example:8443' }, null],
      ]);
      const text = JSON.stringify(audit);
      for (const secret of ['PATHTOKEN', 'QUERYTOKEN', 'whsec_', set.secret.slice(6), rotated.secret.slice(6)]) expect(text).not.to.include(secret);
      const byKind = await cliJson<{ data: AuditRecord[] }>(['audit', 'list', '--kind', 'webhook_secret_rotated'], env, cwd);
      expect(byKind.data.map((e) => e.actor.name)).to.deep.equal(['bob']);
      const human = await runCli(['audit', 'list', '--org', orgId, '--kind', 'notification_retried'], env, cwd);
      expect(human.stdout).to.include(`notification ${pending!.id} (api_key.issued)`).and.to.include('carol');
    });

    it('C-162: org webhook set --events / --enabled / --disabled set what the API\'s PUT sets, checked as it checks them; options not given keep their value; org webhook show shows both', async () => {
      const { env, cwd, orgId } = await prepare();
      const url = 'https://hooks.acme.example/cos';
      type Shown = { url: string; events: string[]; enabled: boolean };
      const show = () => cliJson<Shown>(['org', 'webhook', 'show', orgId], env, cwd);
      const set = (...args: string[]) => cliJson<Shown & { secret?: string }>(['org', 'webhook', 'set', orgId, '--url', url, ...args], env, cwd);
      const outbox = async () => (await notifications(env, cwd)).length;

      expect(await set()).to.include({ enabled: true }).and.to.deep.include({ events: ['*'] });
      const all = await runCli(['org', 'webhook', 'show', orgId], env, cwd);
      expect(all.stdout).to.match(/\n  events: +all \(\*\)\n/).and.to.match(/\n  enabled: +yes\n/);

      const chosen = await set('--events', 'api_key.revoked, api_key.exposed', '--disabled');
      expect(chosen).to.deep.include({ events: ['api_key.exposed', 'api_key.revoked'], enabled: false });
      expect(chosen.secret, 'an existing endpoint keeps its secret').to.equal(undefined);
      expect(await show()).to.deep.include({ url, events: ['api_key.exposed', 'api_key.revoked'], enabled: false });
      const human = await runCli(['org', 'webhook', 'show', orgId], env, cwd);
      expect(human.stdout).to.match(/\n  events: +api_key\.exposed, api_key\.revoked\n/).and.to.match(/\n  enabled: +no /);

      // Disabled: a revocation writes nothing to the outbox for it.
      const key = await cliJson<{ id: string }>(['key', 'issue', orgId, '--label', 'ci'], env, cwd);
      await cliJson(['key', 'revoke', orgId, key.id], env, cwd);
      expect(await outbox()).to.equal(0);
      // --url alone keeps events and enabled; --enabled keeps the events.
      expect(await set()).to.deep.include({ events: ['api_key.exposed', 'api_key.revoked'], enabled: false });
      expect(await set('--enabled')).to.deep.include({ events: ['api_key.exposed', 'api_key.revoked'], enabled: true });
      const second = await cliJson<{ id: string }>(['key', 'issue', orgId, '--label', 'ci2'], env, cwd);
      expect(await outbox(), 'api_key.issued is not subscribed').to.equal(0);
      await cliJson(['key', 'revoke', orgId, second.id], env, cwd);
      expect(await outbox(), 'api_key.revoked is').to.equal(1);
      expect(await set('--events', '*')).to.deep.include({ events: ['*'], enabled: true });

      // Refused as the API refuses the same `events`: exit 2 naming --events, nothing changed.
      const auditBefore = (await cliJson<{ data: unknown[] }>(['audit', 'list', '--org', orgId, '--all'], env, cwd)).data.length;
      const issue = 'must be ["*"] or a non-empty list of distinct event types (api_key.issued, api_key.revoked, api_key.exposed, api_key.rolled, api_key.expiring)';
      for (const bad of ['api_key.bogus', 'api_key.revoked,api_key.revoked', '*,api_key.revoked', ',', 'ping']) {
        const r = await runCli(['org', 'webhook', 'set', orgId, '--url', url, '--events', bad, '--disabled', '--json'], env, cwd);
        expect(r.code, `${bad}: ${r.stderr}`).to.equal(2);
        expect(r.stdout).to.equal('');
        expect(JSON.parse(r.stderr), bad).to.deep.equal({ error: 'VALIDATION_ERROR', message: `invalid input: --events: ${issue}` });
      }
      const both = await runCli(['org', 'webhook', 'set', orgId, '--url', url, '--enabled', '--disabled'], env, cwd);
      expect(both.code).to.equal(2);
      expect(both.stderr).to.match(/^cos-admin: option '--enabled' cannot be used with option '--disabled'\n$/);
      expect(await show()).to.deep.include({ events: ['*'], enabled: true });
      expect((await cliJson<{ data: unknown[] }>(['audit', 'list', '--org', orgId, '--all'], env, cwd)).data.length).to.equal(auditBefore);
    });

    it('rotate-secret --overlap keeps the old secret (as stored) until the overlap ends (default 24h); --overlap 0 drops it; a malformed --overlap is a usage error', async () => {
      const { env, cwd, orgId, sql } = await prepare();
      await cliJson(['org', 'webhook', 'set', orgId, '--url', 'https://hooks.acme.example/cos'], env, cwd);
      const before = await storedSecret(sql, orgId);
      const started = Date.now();
      const rotated = await cliJson<{ secret: string; previous_secret_expires_at: string }>(['org', 'webhook', 'rotate-secret', orgId, '--overlap', '90m'], env, cwd);
      const until = Date.parse(rotated.previous_secret_expires_at);
      expect(until).to.be.within(started + 90 * 60_000, Date.now() + 90 * 60_000);
      const row = async () =>
        ((await sql.knex('webhook_endpoints').select('previous_secret', 'previous_secret_expires_at').where('organisation_id', orgId)) as Array<{ previous_secret: string | null; previous_secret_expires_at: unknown }>)[0]!;
      expect((await row()).previous_secret).to.equal(before);
      expect(Number((await row()).previous_secret_expires_at)).to.equal(until);
      const byDefault = await cliJson<{ previous_secret_expires_at: string }>(['org', 'webhook', 'rotate-secret', orgId], env, cwd);
      expect(Date.parse(byDefault.previous_secret_expires_at) - Date.now()).to.be.within(23 * 3_600_000, 24 * 3_600_000);
      const instant = await cliJson<{ previous_secret_expires_at: string | null }>(['org', 'webhook', 'rotate-secret', orgId, '--overlap', '0'], env, cwd);
      expect(instant.previous_secret_expires_at).to.equal(null);
      expect((await row()).previous_secret).to.equal(null);
      const bad = await runCli(['org', 'webhook', 'rotate-secret', orgId, '--overlap', '2 days'], env, cwd);
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.include("option '--overlap <duration>' argument '2 days' is invalid");
      const tooLong = await runCli(['org', 'webhook', 'rotate-secret', orgId, '--overlap', '25h'], env, cwd);
      expect(tooLong.code).to.equal(2);
      expect(tooLong.stderr).to.include("option '--overlap <duration>' argument '25h' is invalid. It must be at most 24h.");
    });

    it('C-59: with WEBHOOK_SECRET_ENCRYPTION_KEY no whsec_ is stored and serve signs with the secret shown once; the key rotates with previous keys and reencrypt-secrets', async () => {
      const underA: Env = { WEBHOOK_SECRET_ENCRYPTION_KEY: KEY_A.toString('base64') };
      const { env, cwd, orgId, sql } = await prepare(underA);
      let secret = '';
      const receiver = await startReceiver(() => secret);
      receivers.push(receiver);
      secret = (await cliJson<{ secret: string }>(['org', 'webhook', 'set', orgId, '--url', receiver.url], env, cwd)).secret;
      expect(secret).to.match(/^whsec_/);
      const stored = await storedSecret(sql, orgId);
      expect(stored).to.match(new RegExp(`^whenc:v1:${webhookSecretKeyId(KEY_A)}:`));
      expect(JSON.stringify(await sql.knex('webhook_endpoints').select('*'))).not.to.include('whsec_').and.not.to.include(secret.slice(6));

      const first = await serve(env, cwd);
      expect((await first.listening()).line).to.include({ webhook_secrets: webhookSecretKeyId(KEY_A) });
      await cliJson(['key', 'issue', orgId, '--label', 'one'], env, cwd);
      await receiver.waitFor((d) => d.length >= 1);
      await stop(first);

      // Rotate the key: the new one current, the old one previous; then move every secret under the new one.
      const rotating: Env = { ...env, WEBHOOK_SECRET_ENCRYPTION_KEY: KEY_B.toString('hex'), WEBHOOK_SECRET_PREVIOUS_KEYS: KEY_A.toString('base64') };
      const report = await cliJson(['org', 'webhook', 'reencrypt-secrets'], rotating, cwd);
      expect(report).to.deep.equal({ key_id: webhookSecretKeyId(KEY_B), examined: 1, reencrypted: 1, unchanged: 0, skipped: 0, failed: [] });
      expect(await storedSecret(sql, orgId)).to.match(new RegExp(`^whenc:v1:${webhookSecretKeyId(KEY_B)}:`));
      const again = await runCli(['org', 'webhook', 'reencrypt-secrets'], rotating, cwd);
      expect(again.code).to.equal(0);
      expect(again.stdout).to.include(`1 webhook endpoint examined: 0 rewritten encrypted under key ${webhookSecretKeyId(KEY_B)}, 1 already so.`);

      const onlyB: Env = { ...env, WEBHOOK_SECRET_ENCRYPTION_KEY: KEY_B.toString('base64url') };
      const second = await serve(onlyB, cwd);
      await cliJson(['key', 'issue', orgId, '--label', 'two'], onlyB, cwd);
      await receiver.waitFor((d) => d.length >= 2);
      await stop(second);
      expect(receiver.delivered.map((d) => [d.type, d.verified])).to.deep.equal([
        ['api_key.issued', true],
        ['api_key.issued', true],
      ]);
    });

    it('C-59: a secret under a key serve lacks is not sent: a clear last_error naming the key id, retried then failed, and serve keeps running; reencrypt-secrets reports it and exits 1', async () => {
      const { env, cwd, orgId, sql } = await prepare({ WEBHOOK_SECRET_ENCRYPTION_KEY: KEY_B.toString('hex') });
      const receiver = await startReceiver(() => '');
      receivers.push(receiver);
      await cliJson(['org', 'webhook', 'set', orgId, '--url', receiver.url], env, cwd);
      const wrong: Env = { ...env, WEBHOOK_SECRET_ENCRYPTION_KEY: KEY_C.toString('hex'), WEBHOOK_MAX_ATTEMPTS: '2' };
      const server = await serve(wrong, cwd);
      await cliJson(['key', 'issue', orgId, '--label', 'three'], wrong, cwd);
      const expected = `the webhook signing secret is encrypted under key ${webhookSecretKeyId(KEY_B)}, which is not configured (set WEBHOOK_SECRET_ENCRYPTION_KEY or WEBHOOK_SECRET_PREVIOUS_KEYS to that key)`;
      let failed: NotificationRecord | undefined;
      for (let i = 0; i < 100 && failed === undefined; i += 1) {
        failed = (await notifications(wrong, cwd)).find((n) => n.status === 'failed');
        if (failed === undefined) await new Promise((r) => setTimeout(r, 100));
      }
      expect(failed).to.deep.include({ status: 'failed', attempts: 2, last_error: expected });
      expect(receiver.received, 'nothing was sent').to.equal(0);
      expect((await server.listening()).line).to.include({ webhook_secrets: webhookSecretKeyId(KEY_C) });
      const health = await fetch(`${(await server.listening()).url}/v1/health`);
      expect(health.status).to.equal(200);
      expect(server.stdout() + server.stderr()).not.to.include(KEY_C.toString('hex')).and.not.to.include('whsec_');

      const refused = await runCli(['org', 'webhook', 'reencrypt-secrets', '--json'], wrong, cwd);
      expect(refused.code).to.equal(1);
      expect(JSON.parse(refused.stdout)).to.deep.include({ examined: 1, reencrypted: 0, failed: [{ organisation_id: orgId, error: expected }] });
      expect(refused.stderr.trim().split('\n')).to.have.length(1);
      expect(await storedSecret(sql, orgId), 'left as it was').to.match(new RegExp(`^whenc:v1:${webhookSecretKeyId(KEY_B)}:`));
      // Without any key the report says so: nothing is encrypted, and the sealed secret cannot be read.
      const none = await runCli(['org', 'webhook', 'reencrypt-secrets'], { DATABASE_URL: env['DATABASE_URL']! }, cwd);
      expect(none.code).to.equal(1);
      expect(none.stdout).to.include('1 webhook endpoint examined: 0 rewritten stored in clear (no WEBHOOK_SECRET_ENCRYPTION_KEY), 0 already so.');
      expect(none.stdout).to.include(`  ${orgId}: ${expected}`);
      expect(none.stderr).to.equal('cos-admin: 1 secret could not be decrypted and stayed as stored (see the report on stdout)\n');
    });

    /** Four notifications written straight to the outbox: two completed 40 days ago (delivered, failed), one delivered a day ago, one pending (created long ago, due in 10 days). */
    async function agedOutbox(orgId: string, sql: SqlStore): Promise<{ old: string[]; recent: string; pending: string }> {
      const now = Date.now();
      const row = (status: string, completedAt: number | null, createdAt = now - 50 * DAY) => ({
        id: randomUUID(),
        organisation_id: orgId,
        event_type: 'api_key.issued',
        payload: '{}',
        status,
        attempts: 1,
        next_attempt_at: status === 'pending' ? now + 10 * DAY : createdAt,
        created_at: createdAt,
        completed_at: completedAt,
        last_error: status === 'failed' ? 'answered 500' : null,
      });
      const rows = [row('delivered', now - 40 * DAY), row('failed', now - 41 * DAY), row('delivered', now - DAY), row('pending', null, now - 90 * DAY)];
      await sql.knex('webhook_outbox').insert(rows);
      return { old: [rows[0]!.id, rows[1]!.id], recent: rows[2]!.id, pending: rows[3]!.id };
    }

    it('C-59: notifications purge --older-than deletes delivered and failed notifications completed before, never pending ones, and prints how many', async () => {
      const { env, cwd, orgId, sql } = await prepare();
      const aged = await agedOutbox(orgId, sql);
      const purged = await cliJson<{ purged: number; completed_before: string }>(['notifications', 'purge', '--older-than', '30d'], env, cwd);
      expect(purged.purged).to.equal(2);
      expect(Math.abs(Date.parse(purged.completed_before) - (Date.now() - 30 * DAY))).to.be.below(60_000);
      expect((await notifications(env, cwd)).map((n) => n.id).sort()).to.deep.equal([aged.recent, aged.pending].sort());
      const text = await runCli(['notifications', 'purge', '--older-than', '12h'], env, cwd);
      expect(text.code).to.equal(0);
      expect(text.stdout).to.match(/^Purged 1 notification delivered or failed before \d{4}-\d\d-\d\dT[\d:.]+Z\.\n$/);
      expect((await notifications(env, cwd)).map((n) => n.id)).to.deep.equal([aged.pending]);
      const bad = await runCli(['notifications', 'purge', '--older-than', '30'], env, cwd);
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.match(/option '--older-than <duration>' argument '30' is invalid/);
      expect(await runCli(['notifications', 'purge'], env, cwd)).to.deep.include({ code: 2 });
    });

    it('C-59: serve purges notifications completed longer ago than NOTIFICATION_RETENTION at start, and never a pending one', async () => {
      const { env, cwd, orgId, sql } = await prepare();
      const aged = await agedOutbox(orgId, sql);
      const p = await serve({ ...env, NOTIFICATION_RETENTION: '30d' }, cwd);
      expect((await p.listening()).line).to.include({ webhook_secrets: 'clear' });
      const line = async () => p.logLines().find((l) => l['msg'] === 'purged delivered and failed webhook notifications past their retention');
      for (let i = 0; i < 100 && (await line()) === undefined; i += 1) await new Promise((r) => setTimeout(r, 50));
      expect(await line()).to.deep.include({ purged: 2 });
      const left = ((await sql.knex('webhook_outbox').select('id')) as Array<{ id: string }>).map((r) => r.id).sort();
      expect(left).to.deep.equal([aged.recent, aged.pending].sort());
      for (const id of aged.old) expect(left).not.to.include(id);
    });
  });
}
