/**
 * One log line per request through the Logger port, and no secret in any log line (C-31, C-15):
 * neither the Authorization header, nor a raw key (issued, presented, or pasted into a path or a
 * query string), nor a key's digest.
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { createInMemoryStore } from '@cos/core/testing';
import { faultyStore } from './support/faults.js';
import { createWorld, UNKNOWN_KEY, type World } from './support/world.js';

describe('adapter-koa: request logging', () => {
  let world: World;
  beforeEach(async () => {
    world = await createWorld();
  });
  afterEach(async () => {
    await world.close();
  });

  const requestLines = (w: World) => w.httpLogger.entries.filter((e) => e.message === 'request completed' || e.message === 'request failed');

  it('one line per request: method, route, path, status, latency, request id, and the organisation once authenticated', async () => {
    const ok = await world.api.get(`/v1/organisations/${world.own.orgId}/api-keys?limit=5`, {
      key: world.own.key,
      headers: { 'x-request-id': 'trace-1' },
    });
    const denied = await world.api.get('/v1/organisations');
    const unknown = await world.api.get('/v1/nope');
    const lines = requestLines(world);
    expect(lines).to.have.length(3);
    const [first, second, third] = lines.map((l) => l.fields);
    expect(first).to.deep.include({
      request_id: 'trace-1',
      method: 'GET',
      route: '/v1/organisations/:org_id/api-keys',
      path: `/v1/organisations/${world.own.orgId}/api-keys`,
      status: 200,
      organisation_id: world.own.orgId,
      key_id: world.own.keyId,
    });
    expect(first!['latency_ms']).to.be.a('number').and.at.least(0);
    expect(second).to.deep.include({ method: 'GET', route: '/v1/organisations', status: 401, error_code: 'UNAUTHORIZED' });
    expect(second).to.not.have.property('organisation_id');
    expect(second!['request_id']).to.equal(denied.headers.get('x-request-id'));
    expect(third).to.deep.include({ route: null, path: '/v1/nope', status: 404 });
    expect(ok.status).to.equal(200);
    expect(unknown.status).to.equal(404);
    expect(lines.every((l) => l.level === 'info')).to.equal(true);
  });

  it('C-31: no log line contains an Authorization value, a raw key or its digest', async () => {
    const issued = await world.api.post(`/v1/organisations/${world.own.orgId}/api-keys`, { key: world.own.key, json: { label: 'logged?' } });
    const secrets = [world.own.key, world.platform.key, world.revokedKey, UNKNOWN_KEY, issued.body.key as string];
    await world.api.get('/v1/organisations', { key: world.platform.key });
    await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: world.revokedKey });
    await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: UNKNOWN_KEY });
    await world.api.get(`/v1/organisations/${world.own.orgId}`, { authorization: `Token ${world.own.key}` });
    // Keys pasted where they do not belong: the query string and the path.
    await world.api.get(`/v1/organisations/${world.own.orgId}?api_key=${world.own.key}`, { key: world.own.key });
    await world.api.get(`/v1/${world.platform.key}`);
    await world.api.get(`/v1/organisations/${world.own.key}`, { key: world.platform.key });
    const text = JSON.stringify([...world.httpLogger.entries, ...world.tc.logger.entries]);
    for (const secret of secrets) {
      expect(text).to.not.include(secret);
      expect(text).to.not.include(secret.slice(9)); // the secret part alone
      expect(text).to.not.include(createHash('sha256').update(secret).digest('hex'));
    }
    expect(text.toLowerCase()).to.not.include('bearer');
    expect(text).to.not.include('api_key=');
    expect(requestLines(world)).to.have.length(8);
  });

  it('C-15: an unexpected failure logs its stack at error level while the client only sees the request id', async () => {
    const store = faultyStore(createInMemoryStore());
    const w = await createWorld({ store });
    try {
      store.failWith(() => new Error(`SQLITE_CORRUPT: select * from api_keys where digest = '${'a'.repeat(64)}'`));
      const res = await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key, headers: { 'x-request-id': 'boom-1' } });
      expect(res.status).to.equal(500);
      expect(res.body).to.deep.equal({
        error: 'INTERNAL_ERROR',
        message: 'An unexpected error occurred; quote request id boom-1 when reporting it',
        details: [],
      });
      expect(res.text).to.not.match(/SQLITE|select|at .*\.ts/);
      const line = requestLines(w).at(-1)!;
      expect(line.level).to.equal('error');
      expect(line.fields).to.deep.include({ request_id: 'boom-1', status: 500, error_code: 'INTERNAL_ERROR' });
      const err = line.fields['err'] as { type: string; message: string; stack: string };
      expect(err.type).to.equal('Error');
      expect(err.message).to.include('SQLITE_CORRUPT');
      expect(err.stack).to.include('faults.ts');
      expect(JSON.stringify(line)).to.not.include('a'.repeat(64)); // digest-shaped text is redacted
    } finally {
      await w.close();
    }
  });
});
