/**
 * Introspection across two real `cos-admin serve` processes on one Postgres and one Redis, credential
 * caches on and warm (C-272, C-36): a key introspected through the cache on both instances and
 * revoked at one is `active: false` on the very next introspection at either, and one edited at one is
 * answered with its new record at either; a warm introspection
 * sends no credential read to Postgres; and `count: true` shares its organisation's window with the
 * key's own requests on the other instance.
 */
import { expect } from 'chai';
import type { TcpProxy } from '@cos/test-support/tcp-proxy';
import { Client } from '../support/http.js';
import { sleep } from '../support/free-port.js';
import { startServeInstances, type ServeInstances } from '../support/serve-instances.js';
import { storeReadsDuring } from '../support/store-reads.js';

describe('system: introspection across two serve instances (C-272, C-36)', function () {
  this.timeout(300_000);
  let fx: ServeInstances;
  let pgProxy: TcpProxy;
  let a: Client;
  let b: Client;
  let orgId: string;
  let ownerKey: string;
  let gateway: string;

  before(async function () {
    fx = await startServeInstances(this, {
      redis: 'server',
      env: { RATE_LIMIT_PER_MINUTE: '100000000' },
      async seed(ground) {
        ({ id: orgId, key: ownerKey } = await ground.organisation('Tenant Ltd', 'tenant-ltd'));
        const system = await ground.cli<{ id: string }>(['org', 'create', '--name', 'Platform', '--slug', 'platform', '--system']);
        gateway = (await ground.cli<{ key: string }>(['key', 'issue', system.id, '--label', 'gateway', '--scopes', 'keys:introspect'])).key;
      },
      // B reaches Postgres through a proxy that sees its statements: the test can see B answer from its cache.
      instances: [{}, { postgresProxy: true }],
    });
    a = fx.instances[0]!.client;
    b = fx.instances[1]!.client;
    pgProxy = fx.instances[1]!.pgProxy;
    // A fresh Redis: one call per organisation, then its change bound waited out, or nothing would be cached.
    await fx.settle(async () => {
      for (const c of [a, b]) {
        expect((await introspect(c, ownerKey)).status).to.equal(200);
        expect((await c.call('GET', `/v1/organisations/${orgId}`, { key: ownerKey })).status).to.equal(200);
      }
    });
  });

  after(() => fx?.close());

  const introspect = (c: Client, token: string, count = false) => c.call('POST', '/v1/introspect', { key: gateway, body: { token, count }, timeoutMs: 5_000 });
  const active = async (c: Client, token: string): Promise<boolean> => {
    const r = await introspect(c, token);
    expect(r.status, r.text).to.equal(200);
    return r.json<{ active: boolean }>().active;
  };

  async function issueKey(label: string): Promise<{ id: string; key: string }> {
    const r = await a.call('POST', `/v1/organisations/${orgId}/api-keys`, { key: ownerKey, body: { label }, timeoutMs: 5_000 });
    expect(r.status, r.text).to.equal(201);
    return r.json<{ id: string; key: string }>();
  }

  it('a warm introspection is answered from the credential cache: no credential or organisation read sent to Postgres', async () => {
    for (let n = 0; n < 5; n++) expect(await active(b, ownerKey)).to.equal(true);
    const reads = await storeReadsDuring(pgProxy, async () => {
      for (let n = 0; n < 30; n++) expect(await active(b, ownerKey)).to.equal(true);
    });
    expect(reads, 'reads B sent to Postgres for 30 cached introspections').to.deep.equal([]);
  });

  it('a key revoked at one instance is active: false on the next introspection at both (caches warm)', async () => {
    for (const [revokeAt, other] of [[a, b], [b, a]] as const) {
      const k = await issueKey('to revoke');
      for (const c of [a, b]) for (let n = 0; n < 4; n++) expect(await active(c, k.key)).to.equal(true);
      // Warm on B: its next answer would come from the cache if nothing told it otherwise.
      const warm = await storeReadsDuring(pgProxy, async () => {
        for (let n = 0; n < 3; n++) expect(await active(b, k.key)).to.equal(true);
      });
      expect(warm, 'the key is cached on B').to.deep.equal([]);
      // A change whose fence Redis did not confirm in time is refused whole (503): sent again, as its message says.
      let revoked = await revokeAt.call('DELETE', `/v1/organisations/${orgId}/api-keys/${k.id}`, { key: ownerKey, timeoutMs: 5_000 });
      for (let attempt = 0; revoked.status === 503 && attempt < 5; attempt++) {
        await sleep(50 * 2 ** attempt);
        revoked = await revokeAt.call('DELETE', `/v1/organisations/${orgId}/api-keys/${k.id}`, { key: ownerKey, timeoutMs: 5_000 });
      }
      expect(revoked.status, revoked.text).to.equal(204);
      expect(await active(other, k.key), 'the other instance').to.equal(false);
      expect(await active(revokeAt, k.key), 'the revoking instance').to.equal(false);
      expect((await introspect(other, k.key)).text).to.equal('{"active":false}');
    }
  });

  it('a key edited at one instance is answered with its new record on the next introspection at both (caches warm)', async () => {
    const k = await issueKey('to edit');
    const recordAt = async (c: Client) => {
      const r = await introspect(c, k.key);
      expect(r.status, r.text).to.equal(200);
      return r.json<{ active: boolean; metadata: Record<string, string> }>();
    };
    // Warm on both, so that each has the key's record built and its text kept.
    for (const c of [a, b]) for (let n = 0; n < 4; n++) expect((await recordAt(c)).metadata).to.deep.equal({});
    let edited = await a.call('PATCH', `/v1/organisations/${orgId}/api-keys/${k.id}`, { key: ownerKey, body: { metadata: { team: 'payments' } }, timeoutMs: 5_000 });
    for (let attempt = 0; edited.status === 503 && attempt < 5; attempt++) {
      await sleep(50 * 2 ** attempt);
      edited = await a.call('PATCH', `/v1/organisations/${orgId}/api-keys/${k.id}`, { key: ownerKey, body: { metadata: { team: 'payments' } }, timeoutMs: 5_000 });
    }
    expect(edited.status, edited.text).to.equal(200);
    for (const c of [b, a]) expect(await recordAt(c)).to.deep.include({ active: true, metadata: { team: 'payments' } });
  });

  it('count: true on A shares the organisation window with the key own requests on B', async () => {
    for (let attempt = 0; ; attempt++) {
      const counted = await introspect(a, ownerKey, true);
      const window = counted.json<{ rate_limit: { limit: number; remaining: number; reset: number } }>().rate_limit;
      expect(window.limit).to.equal(100_000_000);
      const direct = await b.call('GET', `/v1/organisations/${orgId}`, { key: ownerKey, timeoutMs: 5_000 });
      const second = await introspect(a, ownerKey, true);
      const after = second.json<{ rate_limit: { remaining: number; reset: number } }>().rate_limit;
      // Within one window: the introspection, the direct request and the second introspection are three hits in a row.
      if (Number(direct.headers.get('x-ratelimit-reset')) === window.reset && after.reset === window.reset) {
        expect(Number(direct.headers.get('x-ratelimit-remaining'))).to.equal(window.remaining - 1);
        expect(after.remaining).to.equal(window.remaining - 2);
        return;
      }
      if (attempt === 3) throw new Error('a minute boundary fell between the requests four times');
    }
  });
});
