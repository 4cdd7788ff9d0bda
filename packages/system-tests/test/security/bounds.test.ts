/**
 * Bounded everything: request bodies (C-10: 64 KiB -> 413, also chunked and when only declared),
 * headers (Node's 16 KiB limit -> 431 in the standard error shape, answered for the HTTP parser), page sizes (C-5: limit 1..100, default
 * 20), string lengths (C-13, C-15, C-23, C-6 cursor), and active keys per organisation (C-25:
 * MAX_ACTIVE_KEYS_PER_ORG -> 409 with a clear message, also under concurrent issuance on Postgres).
 */
import { expect } from 'chai';
import { maxHeaderSize } from 'node:http';
import { OPERATOR } from '@cos/core';
import { startStack, createTenant, type Stack, type Tenant } from '../support/stack.js';
import { snapshot, diffSnapshots } from '../support/snapshot.js';
import { checkResponse } from '../support/shapes.js';
import { openApiProblems } from '../support/openapi.js';
import { STORE_TARGETS, startStackOn } from '../support/targets.js';
import type { Incoming } from '../support/http.js';
import { rawRequest, rawSocket, refusedByParser } from '../support/raw-http.js';

function conforms(r: Incoming): void {
  expect([...checkResponse(r), ...openApiProblems(r)], `${r.method} ${r.path.slice(0, 100)} -> ${r.status} ${r.text.slice(0, 200)}`).to.deep.equal([]);
}

function validation(r: Incoming, field: string): void {
  expect(r.status, r.text).to.equal(400);
  conforms(r);
  expect(r.json<{ details: { field: string }[] }>().details.map((d) => d.field)).to.include(field);
}

describe('system: bounded request sizes, pages and strings (C-5, C-6, C-10, C-13, C-15, C-23)', function () {
  this.timeout(60_000);
  let stack: Stack;
  let platform: Tenant;
  let own: Tenant;

  before(async () => {
    stack = await startStack({ config: { rateLimitPerMinute: 1_000_000, unauthRateLimitPerMinute: 1_000_000 } });
    platform = await createTenant(stack.core, 'platform', { system: true });
    own = await createTenant(stack.core, 'bounded');
    for (let i = 0; i < 105; i += 1) await stack.core.members.add(OPERATOR, own.id, { email: `member${String(i).padStart(3, '0')}@example.com` });
  });
  after(async () => {
    await stack?.close();
  });

  it('C-10: a chunked body (no Content-Length) that grows past 64 KiB is 413 PAYLOAD_TOO_LARGE in the standard shape, and nothing is written', async () => {
    const before = await snapshot(stack.store.knex);
    const body = Buffer.from(JSON.stringify({ name: 'n'.repeat(70_000), slug: 'chunked' }));
    const parts = [body.subarray(0, 30_000), body.subarray(30_000, 60_000), body.subarray(60_000)];
    const r = await rawRequest(stack.baseUrl, { method: 'POST', path: '/v1/organisations', headers: { authorization: `Bearer ${platform.key}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, chunks: parts });
    expect(r.status).to.equal(413);
    expect(JSON.parse(r.body)).to.deep.include({ error: 'PAYLOAD_TOO_LARGE', details: [] });
    expect(diffSnapshots(before, await snapshot(stack.store.knex))).to.deep.equal([]);
  });

  it('C-10: a Content-Length over 64 KiB is refused with 413 at once, without waiting for a body that never comes', async () => {
    const r = await rawRequest(stack.baseUrl, {
      method: 'POST',
      path: '/v1/organisations',
      headers: { authorization: `Bearer ${platform.key}`, 'content-type': 'application/json', 'content-length': String(10 * 1024 * 1024) },
      chunks: [Buffer.from('{"name":"x"')],
      end: false,
    });
    expect(r.status).to.equal(413);
    expect(r.ms).to.be.lessThan(2000);
  });

  it(`C-15, C-52, HTTP layer: a header section over Node's limit (${maxHeaderSize} bytes) is 431 in the standard error shape (field "headers"), nothing of it is echoed or logged, and the server keeps serving`, async () => {
    const logged = stack.logger.entries.length;
    const oversized: Record<string, string>[] = [{ 'x-big': 'a'.repeat(maxHeaderSize + 1024) }, { authorization: `Bearer svc_live_${'A'.repeat(maxHeaderSize)}` }];
    for (const headers of oversized) {
      const r = await rawRequest(stack.baseUrl, { method: 'GET', path: '/v1/health', headers });
      refusedByParser(r, 431, [{ field: 'headers', issue: 'too large' }], Object.keys(headers)[0]!);
    }
    const longPath = await rawRequest(stack.baseUrl, { method: 'GET', path: `/v1/organisations?cursor=${'c'.repeat(maxHeaderSize + 10)}`, headers: {} });
    refusedByParser(longPath, 431, [{ field: 'headers', issue: 'too large' }], 'long request line');
    const lines = stack.logger.entries.slice(logged).filter((e) => e.message === 'request refused by the HTTP parser');
    expect(lines.map((e) => e.fields.status)).to.deep.equal([431, 431, 431]);
    expect(JSON.stringify(stack.logger.entries.slice(logged))).to.not.include('AAAAAAAAAAAAAAAA');
    const after = await stack.client.call('GET', '/v1/health');
    expect(after.status).to.equal(200);
  });

  it('C-15, C-52, HTTP layer: a method Node\'s parser does not know (FOO, lower-case get) is 400 in the standard error shape (field "request") with Connection: close, and the server keeps serving', async () => {
    for (const method of ['FOO', 'get', 'G\u00c9T']) {
      const answer = await rawSocket(stack.baseUrl, `${method} /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n`);
      expect(answer, method).to.match(/^HTTP\/1\.1 400 /);
      expect(answer.toLowerCase(), method).to.include('connection: close');
      expect(answer.toLowerCase(), method).to.include('x-request-id: ');
      expect(answer.toLowerCase(), method).to.include('x-ratelimit-remaining: ');
      const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
      expect(JSON.parse(body), method).to.deep.equal({ error: 'VALIDATION_ERROR', message: 'Malformed HTTP request', details: [{ field: 'request', issue: 'malformed HTTP request' }] });
    }
    expect((await stack.client.call('GET', '/v1/health')).status).to.equal(200);
  });

  it('C-5: limit 100 returns at most 100 records, the default is 20, and following next_cursor visits all 105 members exactly once (C-6)', async () => {
    const first = await stack.client.call('GET', `/v1/organisations/${own.id}/members?limit=100`, { key: own.key });
    conforms(first);
    const page1 = first.json<{ data: { id: string }[]; meta: { next_cursor: string | null } }>();
    expect(page1.data).to.have.length(100);
    expect(page1.meta.next_cursor).to.be.a('string');
    const second = await stack.client.call('GET', `/v1/organisations/${own.id}/members?limit=100&cursor=${page1.meta.next_cursor}`, { key: own.key });
    const page2 = second.json<{ data: { id: string }[]; meta: { next_cursor: string | null } }>();
    expect(page2.data).to.have.length(5);
    expect(page2.meta.next_cursor).to.equal(null);
    expect(new Set([...page1.data, ...page2.data].map((m) => m.id)).size).to.equal(105);
    const byDefault = await stack.client.call('GET', `/v1/organisations/${own.id}/members`, { key: own.key });
    expect(byDefault.json<{ data: unknown[] }>().data).to.have.length(20);
  });

  it('C-5: limit outside 1..100 or not an integer (0, 101, 1000000, -1, 1.5, abc, empty, repeated) is 400 with field "limit"', async () => {
    for (const q of ['limit=0', 'limit=101', 'limit=1000000', 'limit=-1', 'limit=1.5', 'limit=abc', 'limit=', 'limit=1&limit=2', 'limit=1e2']) {
      validation(await stack.client.call('GET', `/v1/organisations/${own.id}/members?${q}`, { key: own.key }), 'limit');
      validation(await stack.client.call('GET', `/v1/organisations?${q}`, { key: platform.key }), 'limit');
    }
  });

  it('C-6: a cursor that is too long or does not decode is 400 with field "cursor"', async () => {
    for (const cursor of ['x'.repeat(513), 'not base64!', Buffer.from('[1,2,3]').toString('base64url'), Buffer.from('["2020-01-01T00:00:00.000Z",""]').toString('base64url')]) {
      validation(await stack.client.call('GET', `/v1/organisations/${own.id}/members?cursor=${encodeURIComponent(cursor)}`, { key: own.key }), 'cursor');
    }
  });

  it('C-13: organisation name is trimmed and 1..200 characters; slug 1..63 of a-z, 0-9 and inner "-"', async () => {
    const create = (body: unknown): Promise<Incoming> => stack.client.call('POST', '/v1/organisations', { key: platform.key, body });
    const ok = await create({ name: `  ${'n'.repeat(200)}  `, slug: 's'.repeat(63) });
    expect(ok.status, ok.text).to.equal(201);
    conforms(ok);
    expect(ok.json<{ name: string }>().name).to.equal('n'.repeat(200));
    validation(await create({ name: 'n'.repeat(201), slug: 'long-name' }), 'name');
    validation(await create({ name: '   ', slug: 'blank-name' }), 'name');
    validation(await create({ name: 'x', slug: 's'.repeat(64) }), 'slug');
    for (const slug of ['-lead', 'trail-', 'UPPER', 'under_score', 'sp ace', 'ünï', '']) validation(await create({ name: 'x', slug }), 'slug');
    const id = ok.json<{ id: string }>().id;
    validation(await stack.client.call('PATCH', `/v1/organisations/${id}`, { key: platform.key, body: { name: 'n'.repeat(201) } }), 'name');
    validation(await stack.client.call('PUT', `/v1/organisations/${id}`, { key: platform.key, body: { name: 'n'.repeat(201) } }), 'name');
  });

  it('C-23: key label is 1..100 characters', async () => {
    const issue = (label: string): Promise<Incoming> => stack.client.call('POST', `/v1/organisations/${own.id}/api-keys`, { key: own.key, body: { label } });
    const ok = await issue('l'.repeat(100));
    expect(ok.status, ok.text).to.equal(201);
    conforms(ok);
    validation(await issue('l'.repeat(101)), 'label');
    validation(await issue(''), 'label');
  });

  it('C-15: a caller X-Request-Id of up to 128 visible ASCII characters is echoed; a longer or non-visible one is replaced by a new UUID', async () => {
    const echoed = await stack.client.call('GET', '/v1/health', { headers: { 'x-request-id': 'r'.repeat(128) } });
    expect(echoed.headers.get('x-request-id')).to.equal('r'.repeat(128));
    for (const id of ['r'.repeat(129), 'has space', 'tab\there', '\u00e9t\u00e9']) {
      const r = await stack.client.call('GET', '/v1/health', { headers: { 'x-request-id': Buffer.from(id, 'utf8').toString('latin1') } });
      expect(r.headers.get('x-request-id')).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    }
  });
});

/** C-25 on each store: SQLite always, Postgres when the run has one (always under CI). */
for (const target of STORE_TARGETS) {
  describe(`system: at most MAX_ACTIVE_KEYS_PER_ORG active keys per organisation on ${target.name} (C-25)`, function () {
    this.timeout(60_000);
    const MAX = 3;
    let stack: Stack;
    let running: Awaited<ReturnType<typeof startStackOn>>;

    before(async function () {
      running = await startStackOn(target, 'keycap', { config: { maxActiveKeysPerOrg: MAX, rateLimitPerMinute: 1_000_000 } });
      if (running === undefined) {
        this.skip();
        return;
      }
      stack = running.stack;
    });
    after(async () => {
      await running?.close();
    });

    it(`C-25: with MAX_ACTIVE_KEYS_PER_ORG=${MAX}, once ${MAX} keys are active the next issuance is 409 CONFLICT saying so, changing nothing; revoked and expired keys free a place`, async () => {
      const t = await createTenant(stack.core, 'capped'); // holds 1 active key
      const issue = (body: unknown = { label: 'more' }): Promise<Incoming> => stack.client.call('POST', `/v1/organisations/${t.id}/api-keys`, { key: t.key, body });
      const second = await issue();
      expect(second.status).to.equal(201);
      const expiring = await issue({ label: 'expiring', expires_at: new Date(Date.now() + 600).toISOString() });
      expect(expiring.status, expiring.text).to.equal(201);
      const before = await snapshot(stack.store.knex);
      const refused = await issue();
      expect(refused.status).to.equal(409);
      conforms(refused);
      const body = refused.json<{ error: string; message: string }>();
      expect(body.error).to.equal('CONFLICT');
      expect(body.message).to.match(new RegExp(`maximum number of active API keys \\(${MAX}\\)`));
      expect(diffSnapshots(before, await snapshot(stack.store.knex))).to.deep.equal([]);
      // An expired key no longer counts.
      await new Promise((r) => setTimeout(r, 700));
      expect((await issue()).status).to.equal(201);
      expect((await issue()).status).to.equal(409);
      // A revoked one neither.
      const secondId = second.json<{ id: string }>().id;
      expect((await stack.client.call('DELETE', `/v1/organisations/${t.id}/api-keys/${secondId}`, { key: t.key })).status).to.equal(204);
      expect((await issue()).status).to.equal(201);
      expect((await issue()).status).to.equal(409);
    });

    it(`C-25: 12 concurrent issuances into an organisation one short of the cap: exactly one 201, the rest 409, never more than ${MAX} active`, async () => {
      const t = await createTenant(stack.core, 'racing'); // 1 active
      expect((await stack.client.call('POST', `/v1/organisations/${t.id}/api-keys`, { key: t.key, body: { label: 'two' } })).status).to.equal(201);
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) => stack.client.call('POST', `/v1/organisations/${t.id}/api-keys`, { key: t.key, body: { label: `race ${i}` } })),
      );
      const statuses = answers.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 201), JSON.stringify(statuses)).to.have.length(1);
      expect(statuses.filter((s) => s === 409)).to.have.length(11);
      const page = await stack.core.apiKeys.list(OPERATOR, t.id, { limit: 100 });
      expect(page.items.filter((k) => k.revokedAt === null)).to.have.length(MAX);
    });
  });
}
