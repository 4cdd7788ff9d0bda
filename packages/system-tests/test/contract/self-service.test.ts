/**
 * Self-service over the stack as `cos-admin serve` composes it, on SQLite (a file) and Postgres, with two
 * instances (two containers) on one database: GET /v1/me, Idempotency-Key kept in the store (a
 * retry on the other instance is replayed; the raw key never), and `cause` in the events written.
 * Every response is checked against docs/openapi.yaml.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPERATOR } from '@cos/core';
import { CapturingLogger } from '@cos/core/testing';
import { startContainerStack, postgresUrlForSchema, type ContainerStack } from '../support/container-stack.js';
import { postgresUrl, redisUrl } from '../support/env.js';
import type { Incoming } from '../support/http.js';
import { openApiProblems } from '../support/openapi.js';
import { createSchema, freshSchemaName } from '../support/postgres.js';
import { createTenant, type Tenant } from '../support/stack.js';

interface Database {
  readonly url: string;
  /** REDIS_URL of both instances (the shared counter and credential freshness), if any. */
  readonly redis?: string;
  drop(): Promise<void>;
}

const TARGETS: ReadonlyArray<readonly [string, () => Promise<Database> | null]> = [
  [
    'SQLite (file)',
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'cos-self-service-'));
      return Promise.resolve({ url: `sqlite:${join(dir, 'cos.sqlite')}`, drop: async () => rmSync(dir, { recursive: true, force: true }) });
    },
  ],
  [
    'Postgres',
    () => {
      const url = postgresUrl();
      if (url === undefined) return null;
      const schema = freshSchemaName('selfsvc');
      return createSchema(url, schema).then((drop) => ({ url: postgresUrlForSchema(url, schema), drop }));
    },
  ],
  [
    'Postgres + Redis',
    () => {
      const url = postgresUrl();
      const redis = redisUrl();
      if (url === undefined || redis === undefined) return null;
      const schema = freshSchemaName('selfsvcr');
      return createSchema(url, schema).then((drop) => ({ url: postgresUrlForSchema(url, schema), redis, drop }));
    },
  ],
];

const conforms = (r: Incoming): Incoming => {
  expect(openApiProblems(r), `${r.method} ${r.path} -> ${r.status}: ${r.text}`).to.deep.equal([]);
  return r;
};

for (const [name, open] of TARGETS) {
  describe(`system: self-service (C-56) on ${name}, two instances`, function () {
    this.timeout(60_000);
    let database: Database | null = null;
    let a: ContainerStack;
    let b: ContainerStack;
    let tenant: Tenant;
    const logger = new CapturingLogger();

    before(async function () {
      const opened = open();
      if (opened === null) {
        if (process.env['CI'] === 'true') throw new Error('TEST_DATABASE_URL (and TEST_REDIS_URL) must be set under CI=true');
        this.skip();
        return;
      }
      database = await opened;
      const env = {
        DATABASE_URL: database.url,
        RATE_LIMIT_PER_MINUTE: '100000',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        ...(database.redis !== undefined ? { REDIS_URL: database.redis } : {}),
      };
      a = await startContainerStack(env, logger);
      b = await startContainerStack(env, logger);
      tenant = await createTenant(a.core, 'selfsvc');
    });
    after(async () => {
      await a?.close();
      await b?.close();
      await database?.drop();
    });

    it('GET /v1/me answers the key and its organisation on either instance', async () => {
      for (const stack of [a, b]) {
        const me = conforms(await stack.client.call('GET', '/v1/me', { key: tenant.key }));
        expect(me.status).to.equal(200);
        const body = me.json<{ api_key: { id: string }; organisation: { id: string; slug: string } }>();
        expect(body.api_key.id).to.equal(tenant.keyId);
        expect(body.organisation).to.include({ id: tenant.id, slug: tenant.slug });
        expect(me.text).to.not.include(tenant.key);
      }
    });

    it('Idempotency-Key: the answer is kept in the store, so a retry on the other instance is replayed (without the raw key); another request is 422', async () => {
      const keys = `/v1/organisations/${tenant.id}/api-keys`;
      const headers = { 'idempotency-key': `issue-${name}` };
      const first = conforms(await a.client.call('POST', keys, { key: tenant.key, body: { label: 'retried' }, headers }));
      expect(first.status).to.equal(201);
      const issued = first.json<{ id: string; key: string }>();
      const retry = conforms(await b.client.call('POST', keys, { key: tenant.key, body: { label: 'retried' }, headers }));
      expect(retry.status).to.equal(201);
      expect(retry.headers.get('idempotent-replayed')).to.equal('true');
      expect(retry.json<Record<string, unknown>>()).to.include({ id: issued.id, key_replay_unavailable: true });
      expect(retry.text).to.not.include(issued.key);
      const kept = await a.store.knex.raw('SELECT response_body FROM idempotency_keys');
      expect(JSON.stringify(kept)).to.not.include(issued.key);
      const reused = conforms(await b.client.call('POST', keys, { key: tenant.key, body: { label: 'another' }, headers }));
      expect(reused.status).to.equal(422);
      expect(reused.json<{ error: string }>().error).to.equal('IDEMPOTENCY_KEY_REUSED');
      const list = await a.client.call('GET', `${keys}?limit=100`, { key: tenant.key });
      expect(list.json<{ data: Array<{ label: string }> }>().data.filter((k) => k.label === 'retried')).to.have.length(1);

      const del = `${keys}/${issued.id}`;
      const revoke = { 'idempotency-key': `revoke-${name}` };
      expect((await b.client.call('DELETE', del, { key: tenant.key, headers: revoke })).status).to.equal(204);
      const again = await a.client.call('DELETE', del, { key: tenant.key, headers: revoke });
      expect(again.status).to.equal(204);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
    });

    it('Idempotency-Key: concurrent repeats on both instances run the operation once (the others 409 while it runs, or its replay)', async () => {
      const keys = `/v1/organisations/${tenant.id}/api-keys`;
      const headers = { 'idempotency-key': `race-${name}` };
      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? a : b).client.call('POST', keys, { key: tenant.key, body: { label: 'raced' }, headers })),
      );
      for (const r of answers) conforms(r);
      const firsts = answers.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
      expect(firsts, answers.map((r) => `${r.status} ${r.text}`).join('\n')).to.have.length(1);
      for (const r of answers.filter((x) => x !== firsts[0])) {
        if (r.status === 409) expect(r.json<{ error: string }>().error).to.equal('IDEMPOTENCY_KEY_IN_USE');
        else expect([r.status, r.headers.get('idempotent-replayed')]).to.deep.equal([201, 'true']);
      }
      const list = await a.client.call('GET', `${keys}?limit=100`, { key: tenant.key });
      expect(list.json<{ data: Array<{ label: string }> }>().data.filter((k) => k.label === 'raced')).to.have.length(1);
    });

    it('C-130: a read-only key\'s DELETE with Idempotency-Key X is 403 and claims nothing: the admin\'s DELETE with X on the other instance revokes, the reader is 403 again', async () => {
      const reader = await a.core.apiKeys.issue(OPERATOR, tenant.id, { label: 'reader', scopes: ['organisations:read'] });
      const victim = await a.core.apiKeys.issue(OPERATOR, tenant.id, { label: 'victim' });
      const path = `/v1/organisations/${tenant.id}/api-keys/${victim.key.id}`;
      const headers = { 'idempotency-key': `reader-delete-${name}` };
      const refused = conforms(await a.client.call('DELETE', path, { key: reader.rawKey, headers }));
      expect(refused.status).to.equal(403);
      const revoked = conforms(await b.client.call('DELETE', path, { key: tenant.key, headers }));
      expect([revoked.status, revoked.headers.get('idempotent-replayed')]).to.deep.equal([204, null]);
      for (const stack of [a, b]) expect(conforms(await stack.client.call('GET', '/v1/me', { key: victim.rawKey })).status).to.equal(401);
      const again = conforms(await a.client.call('DELETE', path, { key: reader.rawKey, headers }));
      expect([again.status, again.headers.get('idempotent-replayed')]).to.deep.equal([403, null]);
      const replay = conforms(await a.client.call('DELETE', path, { key: tenant.key, headers }));
      expect([replay.status, replay.headers.get('idempotent-replayed')]).to.deep.equal([204, 'true']);
    });

    it('C-131: another key of the organisation reusing a value gets 422 and nothing of the kept answer, on either instance', async () => {
      const colleague = await a.core.apiKeys.issue(OPERATOR, tenant.id, { label: 'colleague' });
      const keys = `/v1/organisations/${tenant.id}/api-keys`;
      const headers = { 'idempotency-key': `colleague-${name}` };
      const first = conforms(await a.client.call('POST', keys, { key: tenant.key, body: { label: 'mine' }, headers }));
      expect(first.status).to.equal(201);
      const id = first.json<{ id: string }>().id;
      const other = conforms(await b.client.call('POST', keys, { key: colleague.rawKey, body: { label: 'mine' }, headers }));
      expect(other.status).to.equal(422);
      expect(other.text).to.not.include(id);
      const replay = conforms(await b.client.call('POST', keys, { key: tenant.key, body: { label: 'mine' }, headers }));
      expect([replay.status, replay.headers.get('idempotent-replayed'), replay.json<{ id: string }>().id]).to.deep.equal([201, 'true', id]);
    });

    it('C-132: a body nested 5000 levels deep with an Idempotency-Key is 400 in the standard shape (not 500) and nothing is kept under the key', async () => {
      const keys = `/v1/organisations/${tenant.id}/api-keys`;
      const headers = { 'idempotency-key': `deep-${name}` };
      const body = `{"label":${'['.repeat(4999)}${']'.repeat(4999)}}`;
      for (const stack of [a, b]) {
        const deep = conforms(await stack.client.call('POST', keys, { key: tenant.key, body, headers }));
        expect(deep.status, deep.text).to.equal(400);
        expect(deep.json()).to.deep.equal({
          error: 'VALIDATION_ERROR',
          message: 'Request validation failed',
          details: [{ field: 'body', issue: 'must not nest objects or arrays more than 64 levels deep' }],
        });
      }
      const valid = conforms(await b.client.call('POST', keys, { key: tenant.key, body: { label: 'shallow' }, headers }));
      expect([valid.status, valid.headers.get('idempotent-replayed')]).to.deep.equal([201, null]);
    });

    it('Idempotency-Key: expired answers are swept from the store', async () => {
      const before = Number((await a.store.query<{ n: unknown }>('SELECT count(*) AS n FROM idempotency_keys'))[0]!.n);
      expect(before).to.be.greaterThan(0);
      await a.store.query('UPDATE idempotency_keys SET expires_at = ?', [Date.now() - 1]);
      expect(await b.core.idempotency.sweep()).to.equal(before);
      expect(Number((await a.store.query<{ n: unknown }>('SELECT count(*) AS n FROM idempotency_keys'))[0]!.n)).to.equal(0);
    });

    it('events carry cause: a key over HTTP, the operator', async () => {
      await a.core.webhooks.set(OPERATOR, tenant.id, 'https://127.0.0.1:9/hook');
      const issued = conforms(await a.client.call('POST', `/v1/organisations/${tenant.id}/api-keys`, { key: tenant.key, body: { label: 'caused' } }));
      const id = issued.json<{ id: string }>().id;
      await b.core.apiKeys.revoke(OPERATOR, tenant.id, id);
      const notes = await a.store.stores.outbox.list({ organisationId: tenant.id }, { limit: 100, after: null });
      const causes = notes
        .map((n) => JSON.parse(n.payload) as { type: string; data: { key_id: string; cause: unknown } })
        .filter((p) => p.data.key_id === id)
        .map((p) => [p.type, p.data.cause]);
      expect(causes).to.have.deep.members([
        ['api_key.issued', { type: 'api_key', key_id: tenant.keyId }],
        ['api_key.revoked', { type: 'operator' }],
      ]);
    });

    it('the webhook endpoint over HTTP: PUT, rotate-secret with overlap, ping, deliveries and redeliver on either instance', async () => {
      const org = await createTenant(a.core, 'selfhook');
      const hook = `/v1/organisations/${org.id}/webhook-endpoint`;
      const created = conforms(await a.client.call('PUT', hook, { key: org.key, body: { url: 'https://127.0.0.1:9/hook', events: ['api_key.revoked'] } }));
      expect(created.status).to.equal(201);
      const got = conforms(await b.client.call('GET', hook, { key: org.key }));
      expect(got.json<{ events: string[] }>().events).to.deep.equal(['api_key.revoked']);
      const rotated = conforms(await b.client.call('POST', `${hook}/rotate-secret`, { key: org.key, body: { overlap_seconds: 600 } }));
      expect(rotated.status).to.equal(200);
      const stored = await a.store.stores.webhooks.get(org.id);
      expect(stored?.previousSecret).to.be.a('string');
      expect(stored?.previousSecretExpiresAt?.toISOString()).to.equal(rotated.json<{ previous_secret_expires_at: string }>().previous_secret_expires_at);
      const ping = conforms(await a.client.call('POST', `${hook}/ping`, { key: org.key }));
      expect(ping.status).to.equal(202);
      const id = ping.json<{ notification_id: string }>().notification_id;
      const list = conforms(await b.client.call('GET', `${hook}/deliveries?status=pending`, { key: org.key }));
      expect(list.json<{ data: Array<{ id: string; event_type: string }> }>().data.map((d) => [d.id, d.event_type])).to.deep.equal([[id, 'ping']]);
      const again = conforms(await b.client.call('POST', `${hook}/deliveries/${id}/redeliver`, { key: org.key }));
      expect(again.status).to.equal(202);
      expect(conforms(await a.client.call('DELETE', hook, { key: org.key })).status).to.equal(204);
    });
  });
}
