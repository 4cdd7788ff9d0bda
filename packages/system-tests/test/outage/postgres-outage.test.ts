/**
 * Postgres outage (C-4, C-17): the service reaches Postgres through a TCP proxy the test owns,
 * which can blackhole (packets vanish: the hang case) or cut (connections reset: the crash case)
 * the database and restore it, without touching the server. Also fails the database in the middle
 * of a transaction (at its COMMIT, or at the audit insert) to prove nothing is half-written.
 * Runs against TEST_DATABASE_URL in a fresh schema; must run under CI=true.
 */
import { expect } from 'chai';
import { OPERATOR } from '@cos/core';
import { postgresUrl } from '../support/env.js';
import { createSchema, freshSchemaName, proxiedDatabase } from '../support/postgres.js';
import { startStack, uniqueSlug, type Stack } from '../support/stack.js';
import { createCast, type Cast } from '../support/fixture.js';
import { snapshot, diffSnapshots } from '../support/snapshot.js';
import { checkResponse } from '../support/shapes.js';
import { sleep } from '../support/free-port.js';
import type { TcpProxy } from '@cos/test-support/tcp-proxy';
import type { Incoming } from '../support/http.js';

/** C-17 gives the store 2 s; the answer may follow it by scheduling slack only. */
const STORE_BUDGET_MS = 2000;
const SLACK_MS = 300;
/** C-4: the probe has 1 s; the 503 follows it by slack only. */
const HEALTH_BUDGET_MS = 1000;

interface Op {
  readonly name: string;
  readonly method: string;
  readonly path: string;
  readonly key: string;
  readonly body?: unknown;
}

/** Every store-backed operation of the contract, each as a request that would succeed. */
function operations(cast: Cast, spareKeyId: string): Op[] {
  const own = cast.own;
  return [
    { name: 'list organisations', method: 'GET', path: '/v1/organisations', key: cast.platform.key },
    { name: 'create organisation', method: 'POST', path: '/v1/organisations', key: cast.platform.key, body: { name: 'During outage', slug: uniqueSlug('outage') } },
    { name: 'get organisation', method: 'GET', path: `/v1/organisations/${own.id}`, key: own.key },
    { name: 'replace organisation', method: 'PUT', path: `/v1/organisations/${own.id}`, key: own.key, body: { name: 'Renamed in outage' } },
    { name: 'patch organisation', method: 'PATCH', path: `/v1/organisations/${own.id}`, key: own.key, body: { name: 'Patched in outage' } },
    { name: 'list members', method: 'GET', path: `/v1/organisations/${own.id}/members`, key: own.key },
    { name: 'list keys', method: 'GET', path: `/v1/organisations/${own.id}/api-keys`, key: own.key },
    { name: 'issue key', method: 'POST', path: `/v1/organisations/${own.id}/api-keys`, key: own.key, body: { label: 'outage' } },
    { name: 'get key', method: 'GET', path: `/v1/organisations/${own.id}/api-keys/${spareKeyId}`, key: own.key },
    { name: 'revoke key', method: 'DELETE', path: `/v1/organisations/${own.id}/api-keys/${spareKeyId}`, key: own.key },
  ];
}

function expect503(r: Incoming, what: string): void {
  expect(r.status, `${what}: ${r.text}`).to.equal(503);
  expect(checkResponse(r), what).to.deep.equal([]);
  const body = r.json<{ error: string; details: unknown[] }>();
  expect(body.error, what).to.equal('SERVICE_UNAVAILABLE');
  expect(body.details, what).to.deep.equal([]);
}

describe('system: Postgres outage through a TCP proxy the test owns (C-4, C-17)', function () {
  this.timeout(90_000);
  const databaseUrl = postgresUrl();
  let stack: Stack;
  let proxy: TcpProxy;
  let cast: Cast;
  let dropSchema: (() => Promise<void>) | undefined;

  async function healthy(withinMs = 15_000): Promise<number> {
    const started = performance.now();
    for (;;) {
      const r = await stack.client.call('GET', '/v1/health', { timeoutMs: 5000 });
      if (r.status === 200) return performance.now() - started;
      if (performance.now() - started > withinMs) throw new Error(`service did not recover within ${withinMs} ms (health ${r.status})`);
      await sleep(100);
    }
  }

  before(async function () {
    if (databaseUrl === undefined) {
      this.skip();
      return;
    }
    const schema = freshSchemaName('outage');
    dropSchema = await createSchema(databaseUrl, schema);
    const proxied = await proxiedDatabase(databaseUrl);
    proxy = proxied.proxy;
    stack = await startStack({
      databaseUrl: proxied.url,
      schema,
      config: { rateLimitPerMinute: 1_000_000, unauthRateLimitPerMinute: 1_000_000 },
    });
    cast = await createCast(stack.core, { spares: 12, expiringMs: 1 });
  });

  afterEach(async function () {
    if (proxy === undefined) return;
    proxy.disarm();
    proxy.restore();
    await healthy();
  });

  after(async () => {
    await stack?.close();
    await proxy?.close();
    await dropSchema?.();
  });

  it('C-4: /v1/health is 200 {status:"ok"} while Postgres answers', async () => {
    const r = await stack.client.call('GET', '/v1/health');
    expect(r.status).to.equal(200);
    expect(r.json<{ status: string }>().status).to.equal('ok');
    expect(checkResponse(r)).to.deep.equal([]);
  });

  for (const mode of ['blackhole', 'cut'] as const) {
    it(`C-4: with Postgres ${mode === 'blackhole' ? 'blackholed (no answer)' : 'cut (connections reset)'}, /v1/health answers 503 {status:"unavailable"} within 1 s + slack`, async () => {
      if (mode === 'blackhole') proxy.blackhole();
      else proxy.cut();
      for (let i = 0; i < 3; i += 1) {
        const r = await stack.client.call('GET', '/v1/health', { timeoutMs: 10_000 });
        expect(r.status, r.text).to.equal(503);
        expect(r.json<{ status: string }>().status).to.equal('unavailable');
        expect(checkResponse(r)).to.deep.equal([]);
        expect(r.elapsedMs, 'health answer time').to.be.lessThan(HEALTH_BUDGET_MS + SLACK_MS);
      }
    });

    it(`C-17: with Postgres ${mode === 'blackhole' ? 'blackholed' : 'cut'}, all ten store-backed operations answer 503 SERVICE_UNAVAILABLE in the standard error shape within 2 s (no hang), and nothing they tried is written`, async () => {
      const spare = cast.extraKeyIds.ownExtra[mode === 'blackhole' ? 0 : 1] as string;
      const ops = operations(cast, spare);
      const before = await snapshot(stack.store.knex);
      if (mode === 'blackhole') proxy.blackhole();
      else proxy.cut();
      // Concurrently, as real traffic would arrive: none may queue behind another.
      const answers = await Promise.all(ops.map((op) => stack.client.call(op.method, op.path, { key: op.key, body: op.body, timeoutMs: 15_000 })));
      const slow: string[] = [];
      answers.forEach((r, i) => {
        const op = ops[i] as Op;
        expect503(r, op.name);
        if (r.elapsedMs >= STORE_BUDGET_MS + SLACK_MS) slow.push(`${op.name}: ${Math.round(r.elapsedMs)} ms`);
      });
      expect(slow, 'operations answered later than 2 s').to.deep.equal([]);
      proxy.restore();
      await healthy();
      expect(diffSnapshots(before, await snapshot(stack.store.knex)), 'rows written by requests answered 503').to.deep.equal([]);
    });

    it(`C-17: after Postgres was ${mode === 'blackhole' ? 'blackholed' : 'cut'} and comes back, the service resumes by itself: every operation succeeds without a restart`, async () => {
      if (mode === 'blackhole') proxy.blackhole();
      else proxy.cut();
      const down = await stack.client.call('GET', `/v1/organisations/${cast.own.id}`, { key: cast.own.key, timeoutMs: 10_000 });
      expect(down.status).to.equal(503);
      proxy.restore();
      const recoveredInMs = await healthy();
      expect(recoveredInMs, 'time to recover after restore').to.be.lessThan(10_000);
      const spare = cast.extraKeyIds.ownExtra[mode === 'blackhole' ? 2 : 3] as string;
      for (const op of operations(cast, spare)) {
        const r = await stack.client.call(op.method, op.path, { key: op.key, body: op.body });
        expect(r.status, `${op.name}: ${r.text}`).to.be.within(200, 299);
        expect(checkResponse(r), op.name).to.deep.equal([]);
      }
    });
  }

  describe('failure in the middle of a transaction: nothing half-written (C-17, C-40)', () => {
    const traps = [
      { at: 'its COMMIT', pattern: /\bcommit\b/i, mode: 'cut' as const },
      { at: 'its audit insert', pattern: /insert into "?audit_entries/i, mode: 'blackhole' as const },
    ];

    for (const trap of traps) {
      it(`C-40: issuing a key with Postgres failing at ${trap.at} (${trap.mode}) answers 503, leaves neither key nor audit entry, and a retry issues exactly one`, async () => {
        const before = await snapshot(stack.store.knex);
        const sprung = proxy.failOn(trap.pattern, trap.mode);
        const r = await stack.client.call('POST', `/v1/organisations/${cast.own.id}/api-keys`, { key: cast.own.key, body: { label: 'mid-transaction' }, timeoutMs: 15_000 });
        await sprung;
        expect503(r, 'issue');
        proxy.restore();
        await healthy();
        expect(diffSnapshots(before, await snapshot(stack.store.knex))).to.deep.equal([]);
        const retry = await stack.client.call('POST', `/v1/organisations/${cast.own.id}/api-keys`, { key: cast.own.key, body: { label: 'mid-transaction' } });
        expect(retry.status).to.equal(201);
        const id = retry.json<{ id: string }>().id;
        const issued = (await stack.core.audit.list(OPERATOR, { org: cast.own.id, kind: 'api_key_issued', limit: 100 })).items.filter((e) => e.keyId === id);
        expect(issued).to.have.length(1);
        // Checked last, so the all-or-nothing checks above run even when the answer is late.
        expect(r.elapsedMs, 'answer time (C-17: 2 s)').to.be.lessThan(STORE_BUDGET_MS + SLACK_MS);
      });

      it(`C-40: revoking a key with Postgres failing at ${trap.at} (${trap.mode}) answers 503 and the key stays active with no event; a retry revokes it with exactly one api_key_revoked`, async () => {
        const spare = cast.extraKeyIds.ownExtra[trap.mode === 'cut' ? 4 : 5] as string;
        const before = await snapshot(stack.store.knex);
        const sprung = proxy.failOn(trap.pattern, trap.mode);
        const r = await stack.client.call('DELETE', `/v1/organisations/${cast.own.id}/api-keys/${spare}`, { key: cast.own.key, timeoutMs: 15_000 });
        await sprung;
        expect503(r, 'revoke');
        proxy.restore();
        await healthy();
        expect(diffSnapshots(before, await snapshot(stack.store.knex))).to.deep.equal([]);
        const key = await stack.client.call('GET', `/v1/organisations/${cast.own.id}/api-keys/${spare}`, { key: cast.own.key });
        expect(key.json<{ status: string }>().status).to.equal('active');
        const retry = await stack.client.call('DELETE', `/v1/organisations/${cast.own.id}/api-keys/${spare}`, { key: cast.own.key });
        expect(retry.status).to.equal(204);
        const events = (await stack.core.audit.list(OPERATOR, { org: cast.own.id, kind: 'api_key_revoked', limit: 100 })).items.filter((e) => e.keyId === spare);
        expect(events).to.have.length(1);
        // Checked last, so the all-or-nothing checks above run even when the answer is late.
        expect(r.elapsedMs, 'answer time (C-17: 2 s)').to.be.lessThan(STORE_BUDGET_MS + SLACK_MS);
      });

      it(`C-41: creating an organisation with Postgres failing at ${trap.at} (${trap.mode}) answers 503 and leaves neither organisation nor audit entry; a retry creates it once`, async () => {
        const slug = uniqueSlug('mid-tx');
        const before = await snapshot(stack.store.knex);
        const sprung = proxy.failOn(trap.pattern, trap.mode);
        const r = await stack.client.call('POST', '/v1/organisations', { key: cast.platform.key, body: { name: 'Mid transaction', slug }, timeoutMs: 15_000 });
        await sprung;
        expect503(r, 'create organisation');
        proxy.restore();
        await healthy();
        expect(diffSnapshots(before, await snapshot(stack.store.knex))).to.deep.equal([]);
        const retry = await stack.client.call('POST', '/v1/organisations', { key: cast.platform.key, body: { name: 'Mid transaction', slug } });
        expect(retry.status, retry.text).to.equal(201);
        // Checked last, so the all-or-nothing checks above run even when the answer is late.
        expect(r.elapsedMs, 'answer time (C-17: 2 s)').to.be.lessThan(STORE_BUDGET_MS + SLACK_MS);
      });
    }
  });
});
