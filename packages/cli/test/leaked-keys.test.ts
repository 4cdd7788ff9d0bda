/**
 * Leaked keys (C-58, C-62), end to end through real `cos-admin serve` processes: the test plays the secret-scanning
 * programme (its own P-256 key pair and key file, signed alerts) and the organisation's webhook
 * receiver (verifying every delivery with the `standardwebhooks` library). SQLite: two instances on
 * one file; Postgres: two instances on one database, with Redis as the shared counter when
 * TEST_REDIS_URL is set. Rules: C-36 (revocation seen at once on every instance), C-50 (bad
 * signatures counted per source), C-58 (audit kinds, no key material), C-59 (outbox in the same
 * transaction, signed, retried, one delivery per attempt across instances).
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { ensureBuilt, cliJson, printedKeys, runCli, startServe, type Env, type ServeProcess } from './support/cli.js';
import { databaseTargets, type TestDatabase } from './support/databases.js';
import { makeScanner, startReceiver, type Receiver, type Scanner } from './support/scanner.js';

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

interface Setup {
  readonly db: TestDatabase;
  readonly env: Env;
  readonly scanner: Scanner;
  readonly orgId: string;
  readonly key: string;
  readonly keyId: string;
}

async function post(url: string, body: string, headers: Record<string, string>): Promise<Response> {
  return fetch(`${url}/v1/secret-scanning/alerts`, { method: 'POST', headers, body });
}

async function getOrg(url: string, orgId: string, key: string): Promise<number> {
  return (await fetch(`${url}/v1/organisations/${orgId}`, { headers: { authorization: `Bearer ${key}` } })).status;
}

function alert(token: string, url = 'https://github.com/octo/leak/blob/abc/config.env'): string {
  return JSON.stringify([{ token, type: 'cos_live_api_key', url, source: 'content' }]);
}

for (const target of databaseTargets()) {
  describe(`leaked keys through cos-admin serve on ${target.name} (C-36, C-58, C-62)`, function () {
    this.timeout(120_000);
    const servers: ServeProcess[] = [];
    const receivers: Receiver[] = [];
    let setup: Setup | undefined;

    before(ensureBuilt);

    async function prepare(extra: Env = {}): Promise<Setup> {
      const db = await target.create();
      const scanner = makeScanner(db.cwd);
      const redis = process.env['TEST_REDIS_URL'];
      const env: Env = {
        DATABASE_URL: db.databaseUrl,
        PORT: '0',
        SECRET_SCANNING_PUBLIC_KEYS: scanner.keyFile,
        WEBHOOK_POLL_INTERVAL_MS: '50',
        WEBHOOK_RETRY_BASE_MS: '100',
        WEBHOOK_TIMEOUT_MS: '500',
        // The receivers are plain http on loopback: opt in, as a development set-up would.
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        ...(target.name === 'Postgres' && redis !== undefined && redis !== '' ? { REDIS_URL: redis } : {}),
        ...extra,
      };
      await cliJson(['migrate'], env, db.cwd);
      const org = await cliJson<{ id: string }>(['org', 'create', '--name', 'Leaky Ltd', '--slug', 'leaky'], env, db.cwd);
      const issued = await cliJson<{ id: string; key: string }>(['key', 'issue', org.id, '--label', 'ci'], env, db.cwd);
      setup = { db, env, scanner, orgId: org.id, key: issued.key, keyId: issued.id };
      return setup;
    }

    async function serve(s: Setup): Promise<string> {
      const p = startServe([], s.env, s.db.cwd);
      servers.push(p);
      return (await p.listening()).url;
    }

    async function receiverFor(s: Setup, port = 0): Promise<{ receiver: Receiver; secret: string }> {
      let secret = '';
      const receiver = await startReceiver(() => secret, port);
      receivers.push(receiver);
      const set = await cliJson<{ secret: string }>(['org', 'webhook', 'set', s.orgId, '--url', receiver.url], s.env, s.db.cwd);
      secret = set.secret;
      expect(secret).to.match(/^whsec_[A-Za-z0-9+/]+=*$/);
      return { receiver, secret };
    }

    afterEach(async () => {
      for (const s of servers.splice(0)) s.kill();
      await Promise.all(receivers.splice(0).map((r) => r.close()));
      await setup?.db.drop();
      setup = undefined;
    });

    it('C-36, C-58, C-59: a signed alert revokes the key on every instance before it answers, records both audit events and the owner gets one signed api_key.exposed and one api_key.revoked webhook', async () => {
      const s = await prepare();
      const { receiver } = await receiverFor(s);
      const a = await serve(s);
      const b = await serve(s);
      expect(await getOrg(b, s.orgId, s.key)).to.equal(200);

      const body = alert(s.key);
      const res = await post(a, body, s.scanner.headers(body));
      expect(res.status).to.equal(200);
      const feedback = (await res.json()) as unknown[];
      expect(feedback).to.deep.equal([{ token_hash: sha256(s.key), token_type: 'cos_live_api_key', label: 'true_positive' }]);
      // the very next request on the other instance (C-36)
      expect(await getOrg(b, s.orgId, s.key)).to.equal(401);
      expect(await getOrg(a, s.orgId, s.key)).to.equal(401);

      const audit = await cliJson<{ data: Array<Record<string, unknown>> }>(['audit', 'list', '--org', s.orgId, '--limit', '100'], s.env, s.db.cwd);
      const exposed = audit.data.filter((e) => e['kind'] === 'api_key_exposed');
      const revoked = audit.data.filter((e) => e['kind'] === 'api_key_revoked');
      expect(exposed).to.have.length(1);
      expect(exposed[0]).to.deep.include({ key_id: s.keyId, actor: { type: 'secret_scanning' } });
      expect(exposed[0]!['exposure']).to.deep.equal({ type: 'cos_live_api_key', url: 'https://github.com/octo/leak/blob/abc/config.env', source: 'content' });
      expect(revoked).to.have.length(1);
      expect(revoked[0]).to.deep.include({ key_id: s.keyId, actor: { type: 'secret_scanning' } });
      expect(JSON.stringify(audit)).not.to.include(s.key).and.not.to.include(sha256(s.key));

      // two instances poll the outbox: each event arrives exactly once, signed
      await receiver.waitFor((d) => d.length >= 2);
      await new Promise((r) => setTimeout(r, 400)); // room for a duplicate to show up
      expect(receiver.delivered.map((d) => d.type).sort()).to.deep.equal(['api_key.exposed', 'api_key.revoked']);
      expect(receiver.delivered.every((d) => d.verified)).to.equal(true);
      expect(receiver.received).to.equal(2);
      const exposedEvent = receiver.delivered.find((d) => d.type === 'api_key.exposed')!;
      expect(exposedEvent.body['data']).to.deep.equal({
        organisation_id: s.orgId,
        key_id: s.keyId,
        key_prefix: s.key.slice(0, 12),
        label: 'ci',
        url: 'https://github.com/octo/leak/blob/abc/config.env',
        source: 'content',
        descendant_key_ids: [],
        cause: { type: 'secret_scanning' },
      });
      for (const d of receiver.delivered) expect(d.raw).not.to.include(s.key).and.not.to.include(sha256(s.key));

      // serve records each delivery once its answer is back: wait for both records.
      let delivered: { data: Array<{ status: string }> } = { data: [] };
      const recorded = Date.now() + 5_000;
      do {
        delivered = await cliJson<typeof delivered>(['notifications', 'list', '--org', s.orgId], s.env, s.db.cwd);
        if (delivered.data.every((n) => n.status === 'delivered')) break;
        await new Promise((r) => setTimeout(r, 20));
      } while (Date.now() < recorded);
      expect(delivered.data.map((n) => n.status)).to.deep.equal(['delivered', 'delivered']);
    });

    it('C-50, C-58: bad signatures, wrong key ids, tampered bodies, unknown tokens, redelivery, 1001 matches and a 2 MiB body change nothing', async () => {
      const s = await prepare();
      const { receiver } = await receiverFor(s);
      const a = await serve(s);
      const body = alert(s.key);

      const tampered = body.replace('config.env', 'config.enx');
      expect((await post(a, tampered, s.scanner.headers(body))).status, 'tampered body').to.equal(401);
      expect((await post(a, body, s.scanner.headers(body, 'f'.repeat(64)))).status, 'unknown key id').to.equal(401);
      expect((await post(a, body, s.scanner.headers(body, s.scanner.keyId, s.scanner.strangerKey))).status, 'other key').to.equal(401);
      const unsigned = await post(a, body, { 'content-type': 'application/json' });
      expect(unsigned.status, 'no signature').to.equal(401);
      expect(await unsigned.json()).to.deep.equal({ error: 'UNAUTHORIZED', message: 'Missing or invalid secret-scanning signature', details: [] });
      expect(await getOrg(a, s.orgId, s.key), 'nothing revoked').to.equal(200);

      const many = JSON.stringify(Array.from({ length: 1001 }, () => ({ token: s.key, type: 't' })));
      const tooMany = await post(a, many, s.scanner.headers(many));
      expect(tooMany.status).to.equal(400);
      expect(((await tooMany.json()) as { details: unknown[] }).details).to.deep.equal([{ field: 'body', issue: 'must be a JSON array of 1 to 1000 matches' }]);
      const huge = `[${JSON.stringify({ token: 'x'.repeat(1024), type: 't' })}${`,${JSON.stringify({ token: 'y', type: 't' })}`.repeat(90_000)}]`;
      expect(huge.length).to.be.greaterThan(2 * 1024 * 1024);
      expect((await post(a, huge, s.scanner.headers(huge))).status, '2 MiB').to.equal(413);
      expect(await getOrg(a, s.orgId, s.key), 'still nothing revoked').to.equal(200);

      const unknown = alert(`svc_live_${'Z'.repeat(48)}`);
      const unknownRes = await post(a, unknown, s.scanner.headers(unknown));
      expect(unknownRes.status).to.equal(200);
      expect(((await unknownRes.json()) as Array<{ label: string }>)[0]!.label).to.equal('false_positive');

      const first = await post(a, body, s.scanner.headers(body));
      const again = await post(a, body, s.scanner.headers(body));
      expect(first.status).to.equal(200);
      expect(again.status).to.equal(200);
      expect(await again.json()).to.deep.equal(await first.json());
      const audit = await cliJson<{ data: Array<{ kind: string }> }>(['audit', 'list', '--org', s.orgId, '--limit', '100'], s.env, s.db.cwd);
      expect(audit.data.map((e) => e.kind).sort()).to.deep.equal(['api_key_exposed', 'api_key_issued', 'api_key_revoked', 'organisation_created', 'webhook_endpoint_set']);
      await receiver.waitFor((d) => d.length >= 2);
      await new Promise((r) => setTimeout(r, 300));
      expect(receiver.delivered.map((d) => d.type).sort()).to.deep.equal(['api_key.exposed', 'api_key.revoked']);
    });

    it('C-59: a receiver that is down and then up gets the event after retries; one that is slow times out and is retried', async () => {
      const s = await prepare();
      // the port of a receiver that is not listening yet
      const probe = await startReceiver(() => '');
      const port = probe.port;
      await probe.close();
      const set = await cliJson<{ secret: string }>(['org', 'webhook', 'set', s.orgId, '--url', `http://127.0.0.1:${port}/hooks/cos`], s.env, s.db.cwd);
      await serve(s);
      const issued = await cliJson<{ id: string }>(['key', 'issue', s.orgId, '--label', 'second'], s.env, s.db.cwd);
      // attempts fail (connection refused) and are rescheduled
      const until = Date.now() + 10_000;
      let pending: Array<{ attempts: number; status: string; last_error: string | null }> = [];
      while (Date.now() < until) {
        pending = (await cliJson<{ data: typeof pending }>(['notifications', 'list', '--org', s.orgId], s.env, s.db.cwd)).data;
        if (pending[0] !== undefined && pending[0].attempts >= 2) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(pending[0]).to.include({ status: 'pending' });
      expect(pending[0]!.attempts).to.be.at.least(2);
      expect(pending[0]!.last_error).to.match(/connection failed/);

      const receiver = await startReceiver(() => set.secret, port);
      receivers.push(receiver);
      receiver.mode = 'hang'; // slow: never answers within WEBHOOK_TIMEOUT_MS
      // The next attempt comes after its backoff, whenever a loaded machine gets to it: wait for its outcome.
      const slowUntil = Date.now() + 20_000;
      let slow = pending;
      while (Date.now() < slowUntil && receiver.received === 0) await new Promise((r) => setTimeout(r, 100));
      expect(receiver.received, 'an attempt reached the hanging receiver').to.be.at.least(1);
      while (Date.now() < slowUntil) {
        slow = (await cliJson<{ data: typeof pending }>(['notifications', 'list', '--org', s.orgId], s.env, s.db.cwd)).data;
        if (slow[0]?.last_error === 'no answer within 500 ms') break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(slow[0]!.last_error).to.equal('no answer within 500 ms');
      receiver.mode = 'ok';
      await receiver.waitFor((d) => d.length >= 1, 20_000);
      expect(receiver.delivered[0]).to.include({ type: 'api_key.issued', verified: true });
      expect((receiver.delivered[0]!.body['data'] as { key_id: string }).key_id).to.equal(issued.id);
    });

    it('C-59: an instance killed mid-delivery leaves its claim to expire and the event is delivered after a restart', async () => {
      const s = await prepare();
      const { receiver } = await receiverFor(s);
      receiver.mode = 'hang';
      const first = startServe([], s.env, s.db.cwd);
      servers.push(first);
      await first.listening();
      await cliJson(['key', 'issue', s.orgId, '--label', 'third'], s.env, s.db.cwd);
      const until = Date.now() + 10_000;
      while (receiver.received === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 25));
      expect(receiver.received).to.equal(1);
      first.child.kill('SIGKILL');
      await first.exited();
      receiver.mode = 'ok';
      await serve(s);
      await receiver.waitFor((d) => d.length >= 1, 20_000);
      expect(receiver.delivered.map((d) => d.type)).to.deep.equal(['api_key.issued']);
      // The receiver has the event; serve records the delivery once the answer is back: wait for that.
      let list: { data: Array<{ status: string; attempts: number }> } = { data: [] };
      const recorded = Date.now() + 5_000;
      do {
        list = await cliJson<typeof list>(['notifications', 'list', '--org', s.orgId], s.env, s.db.cwd);
        if (list.data[0]?.status === 'delivered') break;
        await new Promise((r) => setTimeout(r, 20));
      } while (Date.now() < recorded);
      expect(list.data[0]!.status).to.equal('delivered');
      expect(list.data[0]!.attempts).to.be.at.least(2);
    });

    it('C-59: notifications retry makes a failed notification due again; webhook show never prints the secret', async () => {
      const s = await prepare({ WEBHOOK_MAX_ATTEMPTS: '1' });
      const { receiver, secret } = await receiverFor(s);
      receiver.mode = 'fail';
      await serve(s);
      await cliJson(['key', 'issue', s.orgId, '--label', 'fourth'], s.env, s.db.cwd);
      let failed: Array<{ id: string; status: string; last_error: string | null }> = [];
      const until = Date.now() + 10_000;
      while (Date.now() < until) {
        failed = (await cliJson<{ data: typeof failed }>(['notifications', 'list', '--status', 'failed'], s.env, s.db.cwd)).data;
        if (failed.length > 0) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(failed).to.have.length(1);
      expect(failed[0]!.last_error).to.equal('answered 500');
      receiver.mode = 'ok';
      const retried = await cliJson<{ status: string; attempts: number }>(['notifications', 'retry', failed[0]!.id], s.env, s.db.cwd);
      expect(retried).to.include({ status: 'pending', attempts: 0 });
      await receiver.waitFor((d) => d.length >= 1);
      const shown = await runCli(['org', 'webhook', 'show', s.orgId], s.env, s.db.cwd);
      expect(shown.code).to.equal(0);
      expect(shown.stdout).to.include(receiver.url).and.not.to.include(secret);
      expect(printedKeys(shown.stdout)).to.deep.equal([]);
    });

    it('SECRET_SCANNING_PUBLIC_KEYS is re-read on SIGHUP: rotated keys take effect without a restart; a bad file keeps the keys in use', async () => {
      const s = await prepare();
      const p = startServe([], s.env, s.db.cwd);
      servers.push(p);
      const url = (await p.listening()).url;
      const unknown = alert(`svc_test_${'Q'.repeat(48)}`);
      expect((await post(url, unknown, s.scanner.headers(unknown))).status).to.equal(200);
      // the programme rotates: a new file with a new key pair only
      const rotated = makeScanner(s.db.cwd);
      const hup = async (pattern: RegExp): Promise<void> => {
        p.child.kill('SIGHUP');
        const until = Date.now() + 5_000;
        while (!p.logLines().some((l) => pattern.test(String(l['msg'])))) {
          if (Date.now() > until) throw new Error(`no ${pattern} line after SIGHUP:\n${p.stdout()}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      await hup(/public keys reloaded/);
      expect((await post(url, unknown, rotated.headers(unknown))).status, 'new key').to.equal(200);
      expect((await post(url, unknown, s.scanner.headers(unknown))).status, 'old key').to.equal(401);
      writeFileSync(rotated.keyFile, '{"public_keys": "nope"}');
      await hup(/not reloaded/);
      expect((await post(url, unknown, rotated.headers(unknown))).status, 'keys kept').to.equal(200);
      expect(p.stdout()).not.to.include('nope');
    });

    it('SECRET_SCANNING_PUBLIC_KEYS: a file that does not parse stops serve with one line naming the variable; unset, the endpoint is 404', async () => {
      const s = await prepare();
      const bad = startServe([], { ...s.env, SECRET_SCANNING_PUBLIC_KEYS: s.env['DATABASE_URL']!.startsWith('sqlite:') ? s.db.cwd : '/nonexistent/keys.json' }, s.db.cwd);
      servers.push(bad);
      const exit = await bad.exited();
      expect(exit.code).to.equal(1);
      expect(bad.stderr().trim().split('\n')).to.have.length(1);
      expect(bad.stderr()).to.match(/SECRET_SCANNING_PUBLIC_KEYS/);
      const { SECRET_SCANNING_PUBLIC_KEYS: _, ...off } = s.env;
      const p = startServe([], off, s.db.cwd);
      servers.push(p);
      const url = (await p.listening()).url;
      const body = alert(s.key);
      const res = await post(url, body, s.scanner.headers(body));
      expect(res.status).to.equal(404);
      expect(await getOrg(url, s.orgId, s.key)).to.equal(200);
    });
  });
}
