/**
 * Requests that fail validation, end to end (C-5..C-8, C-10..C-14, C-23, C-25, C-33). The rules
 * live in the core; these tests check that HTTP carries them to the client exactly, in the
 * standard error shape, and that body problems (C-10) are the adapter's own.
 */
import { connect } from 'node:net';
import { expect } from 'chai';
import { OPERATOR } from '@cos/core';
import { rawRequest } from './support/http.js';
import { createWorld, MISSING_ID, type World } from './support/world.js';

describe('adapter-koa: validation over HTTP', () => {
  let world: World;
  let own: string;
  beforeEach(async () => {
    world = await createWorld();
    own = `/v1/organisations/${world.own.orgId}`;
  });
  afterEach(async () => {
    await world.close();
  });

  describe('C-5..C-7: lists', () => {
    it('C-5: limit outside 1..100 or not an integer is 400 with field "limit"', async () => {
      for (const limit of ['0', '101', 'abc', '1.5', '-1', '']) {
        const res = await world.api.get(`/v1/organisations?limit=${limit}`, { key: world.platform.key });
        expect(res.status, `limit=${limit}`).to.equal(400);
        expect(res.body.error).to.equal('VALIDATION_ERROR');
        expect(res.body.details.map((d: { field: string }) => d.field)).to.deep.equal(['limit']);
      }
      const repeated = await world.api.get('/v1/organisations?limit=1&limit=2', { key: world.platform.key });
      expect(repeated.status).to.equal(400);
    });

    it('C-5: the default page size is 20 and limit=100 is accepted', async () => {
      for (let i = 0; i < 22; i++) await world.tc.core.organisations.create(OPERATOR, { name: `Org ${i}`, slug: `org-${i}` });
      const first = await world.api.get('/v1/organisations', { key: world.platform.key });
      expect(first.body.data).to.have.length(20);
      expect(first.body.meta.next_cursor).to.be.a('string');
      const all = await world.api.get('/v1/organisations?limit=100', { key: world.platform.key });
      expect(all.body.data).to.have.length(25);
      expect(all.body.meta.next_cursor).to.equal(null);
    });

    it('C-6, C-7: following next_cursor visits every organisation that existed at the start exactly once, oldest first, while rows are inserted', async () => {
      for (let i = 0; i < 7; i++) {
        world.tc.clock.advance(10);
        await world.tc.core.organisations.create(OPERATOR, { name: `Org ${i}`, slug: `org-${i}` });
      }
      const before = (await world.api.get('/v1/organisations?limit=100', { key: world.platform.key })).body.data.map(
        (o: { id: string }) => o.id,
      );
      const seen: string[] = [];
      const createdAt: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const q: string = cursor === null ? '?limit=3' : `?limit=3&cursor=${encodeURIComponent(cursor)}`;
        const page = await world.api.get(`/v1/organisations${q}`, { key: world.platform.key });
        expect(page.status).to.equal(200);
        for (const o of page.body.data) {
          seen.push(o.id);
          createdAt.push(o.created_at);
        }
        cursor = page.body.meta.next_cursor;
        // Insert while paging: new rows must not disturb the walk over the old ones.
        world.tc.clock.advance(10);
        await world.tc.core.organisations.create(OPERATOR, { name: `Late ${pages}`, slug: `late-${pages}` });
        pages++;
      } while (cursor !== null && pages < 50);
      expect(cursor).to.equal(null);
      for (const id of before) expect(seen.filter((s) => s === id), id).to.have.length(1);
      expect(seen.slice(0, before.length)).to.deep.equal(before);
      expect([...createdAt].sort()).to.deep.equal(createdAt);
    });

    it('C-6: a cursor that does not decode is 400 with field "cursor"', async () => {
      for (const cursor of ['not-a-cursor', 'AAAA', '%%%']) {
        const res = await world.api.get(`/v1/organisations?cursor=${encodeURIComponent(cursor)}`, { key: world.platform.key });
        expect(res.status).to.equal(400);
        expect(res.body.details).to.deep.equal([{ field: 'cursor', issue: res.body.details[0].issue }]);
      }
    });

    it('C-5, C-6: members and api-keys lists page the same way', async () => {
      for (let i = 0; i < 3; i++) await world.tc.core.members.add(OPERATOR, world.own.orgId, { email: `m${i}@acme.example` });
      const members = await world.api.get(`${own}/members?limit=2`, { key: world.own.key });
      expect(members.body.data).to.have.length(2);
      const rest = await world.api.get(`${own}/members?limit=2&cursor=${members.body.meta.next_cursor}`, { key: world.own.key });
      expect(rest.body.data).to.have.length(2);
      expect(rest.body.meta.next_cursor).to.equal(null);
      const keys = await world.api.get(`${own}/api-keys?limit=0`, { key: world.own.key });
      expect(keys.status).to.equal(400);
      expect(keys.body.details[0].field).to.equal('limit');
    });
  });

  describe('C-8: path parameters', () => {
    it('C-8: an org_id or key_id that is not a UUID is 400 with the parameter name as field', async () => {
      const org = await world.api.get('/v1/organisations/not-a-uuid', { key: world.platform.key });
      expect(org.status).to.equal(400);
      expect(org.body.details).to.deep.equal([{ field: 'org_id', issue: 'must be a UUID' }]);
      const key = await world.api.delete(`${own}/api-keys/12345`, { key: world.own.key });
      expect(key.status).to.equal(400);
      expect(key.body.details).to.deep.equal([{ field: 'key_id', issue: 'must be a UUID' }]);
      const both = await world.api.get('/v1/organisations/nope/api-keys/nope', { key: world.platform.key });
      expect(both.body.details.map((d: { field: string }) => d.field)).to.deep.equal(['org_id', 'key_id']);
    });

    it('C-8, C-33: authentication (401) and the rate limit (429) come before path validation', async () => {
      expect((await world.api.get('/v1/organisations/not-a-uuid')).status).to.equal(401);
      const w = await createWorld({ config: { rateLimitPerMinute: 1 } });
      try {
        expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status).to.equal(200);
        expect((await w.api.get('/v1/organisations/not-a-uuid', { key: w.own.key })).status).to.equal(429);
      } finally {
        await w.close();
      }
    });

    it('C-33: a standard key naming a malformed organisation id gets 403 (authorise before validate)', async () => {
      const res = await world.api.get('/v1/organisations/not-a-uuid', { key: world.own.key });
      expect(res.status).to.equal(403);
    });
  });

  describe('C-10: request bodies', () => {
    it('C-10: malformed JSON is 400 with details [{field:"body", issue:"malformed JSON"}]', async () => {
      for (const body of ['{', '{"name": }', "{'name': 'x'}", '', '\u00ff']) {
        const res = await world.api.patch(own, { key: world.own.key, body, headers: { 'content-type': 'application/json' } });
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body).to.deep.include({ error: 'VALIDATION_ERROR', details: [{ field: 'body', issue: 'malformed JSON' }] });
      }
      const invalidUtf8 = await world.api.patch(own, {
        key: world.own.key,
        body: new Uint8Array([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]),
        headers: { 'content-type': 'application/json' },
      });
      expect(invalidUtf8.body.details).to.deep.equal([{ field: 'body', issue: 'malformed JSON' }]);
    });

    it('C-10: JSON that is not an object is 400 with field "body"', async () => {
      for (const body of ['[]', '[{"name":"x"}]', '"name"', '42', 'null', 'true']) {
        const res = await world.api.patch(own, { key: world.own.key, body, headers: { 'content-type': 'application/json' } });
        expect(res.status, body).to.equal(400);
        expect(res.body.details).to.deep.equal([{ field: 'body', issue: 'must be a JSON object' }]);
      }
      const none = await world.api.post(`${own}/api-keys`, { key: world.own.key });
      expect(none.status).to.equal(400);
      expect(none.body.details).to.deep.equal([{ field: 'body', issue: 'must be a JSON object' }]);
    });

    it('C-132: a body nested more than 64 levels deep is 400 {field:"body"} on every route with a body, with or without Idempotency-Key, and nothing is kept or changed', async () => {
      // Forty requests per organisation: a limit high enough that no 429 hides the answer under test.
      const w = await createWorld({ config: { rateLimitPerMinute: 10_000 } });
      const org = `/v1/organisations/${w.own.orgId}`;
      try {
        const json = { 'content-type': 'application/json' };
        const tooDeep = [{ field: 'body', issue: 'must not nest objects or arrays more than 64 levels deep' }];
        /** A JSON object whose field `name` holds arrays, `levels` containers in all. */
        const arrays = (levels: number): string => `{"name":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
        /** `levels` objects, each the `a` of the one around it. */
        const objects = (levels: number): string => `${'{"a":'.repeat(levels - 1)}{}${'}'.repeat(levels - 1)}`;
        await w.api.put(`${org}/webhook-endpoint`, { key: w.own.key, json: { url: 'https://hooks.acme.example/cos' } });
        const ping = await w.api.post(`${org}/webhook-endpoint/ping`, { key: w.own.key });
        const routes: [string, string, string][] = [
          ['POST', '/v1/organisations', w.platform.key],
          ['PUT', org, w.own.key],
          ['PATCH', org, w.own.key],
          ['PUT', `${org}/key-policy`, w.platform.key],
          ['POST', `${org}/api-keys`, w.own.key],
          ['POST', `${org}/api-keys/${w.own.keyId}/roll`, w.own.key],
          ['PUT', `${org}/webhook-endpoint`, w.own.key],
          ['POST', `${org}/webhook-endpoint/rotate-secret`, w.own.key],
          ['POST', `${org}/webhook-endpoint/ping`, w.own.key],
          ['POST', `${org}/webhook-endpoint/deliveries/${ping.body.notification_id}/redeliver`, w.own.key],
        ];
        const before = { organisation: (await w.api.get(org, { key: w.own.key })).text, audit: (await w.tc.core.audit.list(OPERATOR, { limit: '100' })).items.length };
        for (const [method, path, key] of routes) {
          for (const body of [arrays(65), objects(65), arrays(5000), objects(5000)]) {
            for (const headers of [json, { ...json, 'idempotency-key': `deep ${method} ${path}` }]) {
              const res = await w.api.request(method, path, { key, body, headers });
              expect(res.status, `${method} ${path} ${body.length} ${JSON.stringify(headers)}: ${res.text}`).to.equal(400);
              expect(res.body).to.deep.equal({ error: 'VALIDATION_ERROR', message: 'Request validation failed', details: tooDeep });
            }
          }
        }
        expect((await w.api.get(org, { key: w.own.key })).text).to.equal(before.organisation);
        expect((await w.tc.core.audit.list(OPERATOR, { limit: '100' })).items).to.have.length(before.audit);
        // Nothing was kept under the key: a valid request with it runs.
        const valid = await w.api.post(`${org}/api-keys`, { key: w.own.key, json: { label: 'shallow' }, headers: { 'idempotency-key': `deep POST ${org}/api-keys` } });
        expect([valid.status, valid.headers.get('idempotent-replayed')]).to.deep.equal([201, null]);
      } finally {
        await w.close();
      }
    });

    it('C-132: 64 levels are read and validated as usual; brackets inside strings are not nesting', async () => {
      const arrays64 = await world.api.patch(own, { key: world.own.key, body: `{"name":${'['.repeat(63)}${']'.repeat(63)}}`, headers: { 'content-type': 'application/json' } });
      expect(arrays64.status).to.equal(400);
      expect(arrays64.body.details.map((d: { field: string }) => d.field)).to.deep.equal(['name']);
      const objects64 = await world.api.patch(own, { key: world.own.key, body: `${'{"a":'.repeat(63)}{}${'}'.repeat(63)}`, headers: { 'content-type': 'application/json' } });
      expect(objects64.status).to.equal(400);
      expect(objects64.body.details.map((d: { field: string }) => d.field)).to.deep.equal(['a']);
      const name = `\\"[{${'['.repeat(150)}\\\\`;
      const inString = await world.api.patch(own, { key: world.own.key, body: `{"name":"${name}"}`, headers: { 'content-type': 'application/json', 'idempotency-key': 'brackets' } });
      expect(inString.status, inString.text).to.equal(200);
      expect(inString.body.name).to.equal(JSON.parse(`"${name}"`));
    });

    it('C-10: a non-JSON content type on a body-carrying request is 415 UNSUPPORTED_MEDIA_TYPE', async () => {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', 'application/jsonx']) {
        const res = await world.api.post(`${own}/api-keys`, { key: world.own.key, body: '{"label":"x"}', headers: { 'content-type': type } });
        expect(res.status, type).to.equal(415);
        expect(res.body).to.deep.include({ error: 'UNSUPPORTED_MEDIA_TYPE', details: [] });
      }
      const untyped = await world.api.post(`${own}/api-keys`, { key: world.own.key, body: new TextEncoder().encode('{"label":"x"}') });
      expect(untyped.status).to.equal(415);
    });

    it('C-10: a compressed body (Content-Encoding other than identity) is 415 UNSUPPORTED_MEDIA_TYPE, not "malformed JSON"; identity is read as usual', async () => {
      const { gzipSync } = await import('node:zlib');
      for (const encoding of ['gzip', 'deflate', 'br', 'GZIP', 'gzip, identity']) {
        const res = await world.api.patch(own, {
          key: world.own.key,
          body: gzipSync('{"name":"Acme Zipped"}'),
          headers: { 'content-type': 'application/json', 'content-encoding': encoding },
        });
        expect(res.status, encoding).to.equal(415);
        expect(res.body, encoding).to.deep.equal({
          error: 'UNSUPPORTED_MEDIA_TYPE',
          message: 'Request bodies must not be compressed (no Content-Encoding); send plain JSON',
          details: [],
        });
      }
      const before = await world.api.get(own, { key: world.own.key });
      expect(before.body.name, 'nothing changed').to.not.equal('Acme Zipped');
      const identity = await world.api.patch(own, {
        key: world.own.key,
        body: '{"name":"Acme Identity"}',
        headers: { 'content-type': 'application/json', 'content-encoding': 'identity' },
      });
      expect(identity.status).to.equal(200);
      expect(identity.body.name).to.equal('Acme Identity');
    });

    it('C-10: JSON media types with parameters or a +json suffix are accepted', async () => {
      for (const type of ['application/json; charset=utf-8', 'Application/JSON;charset="UTF-8"', 'application/merge-patch+json']) {
        const res = await world.api.patch(own, { key: world.own.key, body: '{"name":"Acme Two"}', headers: { 'content-type': type } });
        expect(res.status, type).to.equal(200);
      }
    });

    it('C-10: a body over 64 KiB is 413 PAYLOAD_TOO_LARGE; one at the limit is read', async () => {
      const over = JSON.stringify({ name: 'x'.repeat(64 * 1024) });
      const res = await world.api.patch(own, { key: world.own.key, body: over, headers: { 'content-type': 'application/json' } });
      expect(res.status).to.equal(413);
      expect(res.body).to.deep.include({ error: 'PAYLOAD_TOO_LARGE', details: [] });
      const wrapper = JSON.stringify({ name: '' });
      const atLimit = JSON.stringify({ name: 'x'.repeat(64 * 1024 - wrapper.length) });
      expect(Buffer.byteLength(atLimit)).to.equal(64 * 1024);
      const read = await world.api.patch(own, { key: world.own.key, body: atLimit, headers: { 'content-type': 'application/json' } });
      expect(read.status).to.equal(400); // read and parsed: the name is too long (C-13), not too large
      expect(read.body.details).to.deep.equal([{ field: 'name', issue: 'must be a string of 1 to 200 characters' }]);
    });

    it('C-10: a chunked body without Content-Length that grows past the limit is 413', async () => {
      const big = Buffer.from(JSON.stringify({ name: 'y'.repeat(100 * 1024) }));
      const res = await rawRequest(
        world.api,
        'PATCH',
        own,
        { authorization: `Bearer ${world.own.key}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
        big,
      );
      expect(res.status).to.equal(413);
      expect(JSON.parse(res.text).error).to.equal('PAYLOAD_TOO_LARGE');
    });

    it('C-10: after the 413 of a chunked body that grows past the limit, the rest is drained and the same connection answers its next request', async () => {
      const url = new URL(world.api.baseUrl);
      const chunk = 'y'.repeat(8 * 1024);
      const body = `{"name":"${chunk.repeat(12)}"}`;
      const chunked = `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
      const answers = await new Promise<string>((resolve, reject) => {
        const socket = connect(Number(url.port), url.hostname);
        let text = '';
        socket.setEncoding('utf8');
        socket.on('data', (d: string) => {
          text += d;
          // Two complete answers: the 413 and the /v1/health one (both have a Content-Length).
          if ((text.match(/HTTP\/1\.1 /g) ?? []).length === 2 && /"status":"ok"/.test(text)) {
            socket.end();
            resolve(text);
          }
        });
        socket.on('error', reject);
        socket.on('close', () => resolve(text));
        socket.write(
          `PATCH ${own} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${world.own.key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
            chunked +
            'GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n',
        );
      });
      const statuses = [...answers.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
      expect(statuses).to.deep.equal([413, 200]);
    });

    it('C-10: bodies that come with their headers, pipelined on one connection, are each read whole and answered in order; the connection stays open', async () => {
      const url = new URL(world.api.baseUrl);
      const patch = (name: string) => {
        const body = JSON.stringify({ name });
        return `PATCH ${own} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${world.own.key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      };
      const { answers, closed } = await new Promise<{ answers: string; closed: boolean }>((resolve, reject) => {
        const socket = connect(Number(url.port), url.hostname);
        let text = '';
        socket.setEncoding('utf8');
        socket.on('data', (d: string) => {
          text += d;
          if ((text.match(/"name":"Third"/g) ?? []).length === 1) {
            resolve({ answers: text, closed: false });
            socket.end();
          }
        });
        socket.on('error', reject);
        socket.on('close', () => resolve({ answers: text, closed: true }));
        socket.write(patch('First') + patch('Second'));
        setTimeout(() => socket.write(patch('Third')), 20);
      });
      expect([...answers.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]))).to.deep.equal([200, 200, 200]);
      expect([...answers.matchAll(/"name":"(\w+)"/g)].map((m) => m[1])).to.deep.equal(['First', 'Second', 'Third']);
      expect(closed, 'kept alive').to.equal(false);
      expect((await world.tc.core.organisations.get(OPERATOR, world.own.orgId)).name).to.equal('Third');
    });

    it('C-10: the limit is configurable (bodyLimitBytes)', async () => {
      const w = await createWorld({ http: { bodyLimitBytes: 32 } });
      try {
        const res = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: w.own.key, json: { label: 'a label that is long enough' } });
        expect(res.status).to.equal(413);
        expect(res.body.message).to.include('32 bytes');
      } finally {
        await w.close();
      }
    });

    it('C-10, C-33: body problems are answered after authentication and the rate limit', async () => {
      const noKey = await world.api.patch(own, { body: '{', headers: { 'content-type': 'application/json' } });
      expect(noKey.status).to.equal(401);
      const wrongType = await world.api.patch(own, { body: 'x', headers: { 'content-type': 'text/plain' } });
      expect(wrongType.status).to.equal(401);
      const w = await createWorld({ config: { rateLimitPerMinute: 1 } });
      try {
        await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key });
        const limited = await w.api.patch(`/v1/organisations/${w.own.orgId}`, { key: w.own.key, body: '{', headers: { 'content-type': 'application/json' } });
        expect(limited.status).to.equal(429);
      } finally {
        await w.close();
      }
    });

    it('C-10: GET and DELETE requests are answered without reading a body (no 413/415 for one they carry)', async () => {
      const junk = Buffer.alloc(100 * 1024, 0x41);
      const headers = { authorization: `Bearer ${world.own.key}`, 'content-type': 'text/plain', 'content-length': String(junk.length) };
      const get = await rawRequest(world.api, 'GET', own, headers, junk);
      expect(get.status).to.equal(200);
      const del = await rawRequest(world.api, 'DELETE', `${own}/api-keys/${world.revokedKeyId}`, headers, junk);
      expect(del.status).to.equal(204);
    });
  });

  describe('C-11..C-14: organisation bodies', () => {
    it('C-11: every failing field is reported at once, one detail each, with the spec issue texts', async () => {
      const res = await world.api.post('/v1/organisations', {
        key: world.platform.key,
        json: { slug: 'Not A Slug', colour: 'blue', industry_section: 'C' },
      });
      expect(res.status).to.equal(400);
      const byField = Object.fromEntries(res.body.details.map((d: { field: string; issue: string }) => [d.field, d.issue]));
      expect(byField).to.deep.include({ name: 'field required', colour: 'extra fields not permitted', industry_section: 'extra fields not permitted' });
      expect(byField).to.have.property('slug');
      expect(res.body.details).to.have.length(4);
    });

    it('C-11: an empty key in the body is an extra field named ""', async () => {
      const res = await world.api.post(`${own}/api-keys`, { key: world.own.key, json: { label: 'x', '': null } });
      expect(res.status).to.equal(400);
      expect(res.body.details).to.deep.equal([{ field: '', issue: 'extra fields not permitted' }]);
    });

    it('C-12: slug, industry_section, is_system or id in PUT or PATCH is 400 "extra fields not permitted"', async () => {
      for (const field of ['slug', 'industry_section', 'is_system', 'id']) {
        for (const method of ['PUT', 'PATCH']) {
          const res = await world.api.request(method, own, { key: world.own.key, json: { name: 'Acme', [field]: field === 'is_system' ? true : 'a' } });
          expect(res.status, `${method} ${field}`).to.equal(400);
          expect(res.body.details).to.deep.equal([{ field, issue: 'extra fields not permitted' }]);
        }
      }
      for (const field of ['industry_section', 'is_system']) {
        const res = await world.api.post('/v1/organisations', { key: world.platform.key, json: { name: 'N', slug: 'n', [field]: 'C' } });
        expect(res.status).to.equal(400);
        expect(res.body.details).to.deep.equal([{ field, issue: 'extra fields not permitted' }]);
      }
      const unchanged = await world.api.get(own, { key: world.own.key });
      expect(unchanged.body).to.deep.include({ slug: 'acme', industry_section: null, is_system: false });
    });

    it('C-13: name is trimmed and 1..200 characters; slug follows its pattern; a duplicate slug is 409', async () => {
      const created = await world.api.post('/v1/organisations', { key: world.platform.key, json: { name: '  Initech  ', slug: 'initech-2' } });
      expect(created.status).to.equal(201);
      expect(created.body.name).to.equal('Initech');
      for (const name of ['', '   ', 'x'.repeat(201), 42]) {
        const res = await world.api.put(own, { key: world.own.key, json: { name } });
        expect(res.status, JSON.stringify(name)).to.equal(400);
        expect(res.body.details[0].field).to.equal('name');
      }
      for (const slug of ['-a', 'a-', 'A', 'a_b', 'x'.repeat(64), '']) {
        const res = await world.api.post('/v1/organisations', { key: world.platform.key, json: { name: 'N', slug } });
        expect(res.status, slug).to.equal(400);
        expect(res.body.details[0].field).to.equal('slug');
      }
      const dup = await world.api.post('/v1/organisations', { key: world.platform.key, json: { name: 'Another', slug: 'acme' } });
      expect(dup.status).to.equal(409);
      expect(dup.body).to.deep.include({ error: 'CONFLICT', details: [{ field: 'slug', issue: 'already taken' }] });
    });

    it('C-14: PATCH {} changes nothing and answers 200 with the record; PUT requires name', async () => {
      const before = await world.api.get(own, { key: world.own.key });
      world.tc.clock.advance(5000);
      const patched = await world.api.patch(own, { key: world.own.key, json: {} });
      expect(patched.status).to.equal(200);
      expect(patched.body).to.deep.equal(before.body);
      const put = await world.api.put(own, { key: world.own.key, json: {} });
      expect(put.status).to.equal(400);
      expect(put.body.details).to.deep.equal([{ field: 'name', issue: 'field required' }]);
      const renamed = await world.api.patch(own, { key: world.own.key, json: { name: 'Acme Renamed' } });
      expect(renamed.body.name).to.equal('Acme Renamed');
      expect(renamed.body.updated_at).to.equal(world.tc.clock.now().toISOString());
      expect(renamed.body.created_at).to.equal(before.body.created_at);
    });

    it('spec §2: industry_section is read-only: a request that carries it fails with 400', async () => {
      const res = await world.api.patch(own, { key: world.own.key, json: { industry_section: null } });
      expect(res.status).to.equal(400);
      expect(res.body.details).to.deep.equal([{ field: 'industry_section', issue: 'extra fields not permitted' }]);
    });
  });

  describe('C-23, C-25: key issuance bodies', () => {
    it('C-23: label is required (1..100); expires_at must be a future ISO 8601 timestamp; environment live|test', async () => {
      const base = `${own}/api-keys`;
      const missing = await world.api.post(base, { key: world.own.key, json: {} });
      expect(missing.body.details).to.deep.equal([{ field: 'label', issue: 'field required' }]);
      const long = await world.api.post(base, { key: world.own.key, json: { label: 'x'.repeat(101) } });
      expect(long.body.details[0].field).to.equal('label');
      const past = await world.api.post(base, { key: world.own.key, json: { label: 'x', expires_at: '2020-01-01T00:00:00Z' } });
      expect(past.status).to.equal(400);
      expect(past.body.details[0].field).to.equal('expires_at');
      const env = await world.api.post(base, { key: world.own.key, json: { label: 'x', environment: 'prod' } });
      expect(env.body.details[0].field).to.equal('environment');
    });

    it('C-23: environment "test" issues a svc_test_ key, the default is svc_live_; expires_at is kept', async () => {
      const base = `${own}/api-keys`;
      const test = await world.api.post(base, { key: world.own.key, json: { label: 'sandbox', environment: 'test' } });
      expect(test.body.key).to.match(/^svc_test_[A-Za-z0-9]{48}$/);
      const live = await world.api.post(base, { key: world.own.key, json: { label: 'prod' } });
      expect(live.body.key).to.match(/^svc_live_[A-Za-z0-9]{48}$/);
      const expiresAt = new Date(world.tc.clock.now().getTime() + 86_400_000).toISOString();
      const expiring = await world.api.post(base, { key: world.own.key, json: { label: 'temp', expires_at: expiresAt } });
      expect(expiring.body.expires_at).to.equal(expiresAt);
    });

    it('C-25: issuing past MAX_ACTIVE_KEYS_PER_ORG active keys is 409 CONFLICT saying so; revoked keys do not count', async () => {
      // own holds one active key (the revoked and expired ones do not count); the cap is 2.
      const w = await createWorld({ config: { maxActiveKeysPerOrg: 2 } });
      try {
        const base = `/v1/organisations/${w.own.orgId}/api-keys`;
        const second = await w.api.post(base, { key: w.own.key, json: { label: 'second' } });
        expect(second.status).to.equal(201);
        const third = await w.api.post(base, { key: w.own.key, json: { label: 'third' } });
        expect(third.status).to.equal(409);
        expect(third.body.error).to.equal('CONFLICT');
        expect(third.body.message).to.include('maximum number of active API keys (2)');
        expect((await w.api.delete(`${base}/${second.body.id}`, { key: w.own.key })).status).to.equal(204);
        expect((await w.api.post(base, { key: w.own.key, json: { label: 'third' } })).status).to.equal(201);
      } finally {
        await w.close();
      }
    });

    it('C-33: a standard key on another organisation with an invalid body gets 403, not 400', async () => {
      const res = await world.api.post(`/v1/organisations/${world.other.orgId}/api-keys`, { key: world.own.key, json: { nope: 1 } });
      expect(res.status).to.equal(403);
    });

    it('C-33: a platform key with an invalid body on a missing organisation gets 400 (validate before act)', async () => {
      const res = await world.api.post(`/v1/organisations/${MISSING_ID}/api-keys`, { key: world.platform.key, json: {} });
      expect(res.status).to.equal(400);
    });
  });
});
