/**
 * Over HTTP: PATCH …/api-keys/{key_id} (C-261) with metadata (C-260) and networks (C-262), the
 * per-key network check and its place among the answers (C-263), and where the source address
 * comes from behind proxies (C-266): the socket's address, the rightmost X-Forwarded-For hop, or
 * the hops of TRUSTED_PROXIES, never a spoofed one. Every response is checked against
 * docs/openapi.yaml by the test client.
 */
import { expect } from 'chai';
import { OPERATOR } from '@cos/core';
import { createWorld, MISSING_ID, type World } from './support/world.js';

const idem = (key: string): Record<string, string> => ({ 'idempotency-key': key });
const xff = (value: string): Record<string, string> => ({ 'x-forwarded-for': value });

describe('HTTP: editing a key (C-260, C-261)', () => {
  let world: World;
  beforeEach(async () => {
    world = await createWorld();
  });
  afterEach(async () => {
    await world.close();
  });
  const keyPath = (w: World, id: string): string => `/v1/organisations/${w.own.orgId}/api-keys/${id}`;

  it('C-261: PATCH changes label and metadata and answers the record; GET and the list show it; metadata {} when none', async () => {
    const issued = await world.api.post(`/v1/organisations/${world.own.orgId}/api-keys`, { key: world.own.key, json: { label: 'ci', metadata: { owner: 'team-a' } } });
    expect(issued.status).to.equal(201);
    expect(issued.body).to.include({ allowed_cidrs: null });
    expect(issued.body.metadata).to.deep.equal({ owner: 'team-a' });
    const res = await world.api.patch(keyPath(world, issued.body.id), { key: world.own.key, json: { label: 'ci runner', metadata: { owner: null, team: 'payments' } } });
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ id: issued.body.id, label: 'ci runner', status: 'active', allowed_cidrs: null });
    expect(res.body.metadata).to.deep.equal({ team: 'payments' });
    expect(res.body).to.not.have.property('key');
    expect((await world.api.get(keyPath(world, issued.body.id), { key: world.own.key })).body).to.deep.equal(res.body);
    const me = await world.api.get('/v1/me', { key: world.own.key });
    expect(me.body.api_key.metadata).to.deep.equal({});
    const audit = await world.api.get(`/v1/organisations/${world.own.orgId}/audit-events?kind=api_key_updated`, { key: world.own.key });
    expect(audit.body.data.map((e: { detail: unknown }) => e.detail)).to.deep.equal([{ changed_fields: ['label', 'metadata'] }]);
    expect(audit.text).to.not.include('payments').and.not.include('team-a');
  });

  it('C-261: scopes, environment and expires_at are 400 naming each; bad metadata is named by its path; a revoked key is 409; an unknown one 404', async () => {
    const immutable = await world.api.patch(keyPath(world, world.own.keyId), { key: world.own.key, json: { scopes: ['audit:read'], environment: 'test', expires_at: null } });
    expect(immutable.status).to.equal(400);
    expect(immutable.body.details.map((d: { field: string }) => d.field)).to.deep.equal(['scopes', 'environment', 'expires_at']);
    const bad = await world.api.patch(keyPath(world, world.own.keyId), { key: world.own.key, json: { metadata: { owner: 7, 'no spaces': 'x' }, allowed_cidrs: ['10.0.0.1/8'] } });
    expect(bad.status).to.equal(400);
    expect(bad.body.details).to.deep.equal([
      { field: 'metadata.owner', issue: 'must be a string of at most 500 characters without control characters, or null to remove it' },
      { field: 'metadata.no spaces', issue: "name must be 1 to 40 characters of A-Z, a-z, 0-9, '_', '.' and '-'" },
      { field: 'allowed_cidrs.0', issue: 'has host bits set: the network is 10.0.0.0/8' },
    ]);
    const revoked = await world.api.patch(keyPath(world, world.revokedKeyId), { key: world.own.key, json: { label: 'x' } });
    expect(revoked.status).to.equal(409);
    expect(revoked.body.error).to.equal('CONFLICT');
    expect((await world.api.patch(keyPath(world, world.expiredKeyId), { key: world.own.key, json: { label: 'x' } })).status).to.equal(409);
    expect((await world.api.patch(keyPath(world, MISSING_ID), { key: world.own.key, json: { label: 'x' } })).status).to.equal(404);
  });

  it('C-33, C-130: a foreign organisation or a key without api_keys:write is 403 before the body is read or an Idempotency-Key is claimed', async () => {
    const foreign = await world.api.patch(`/v1/organisations/${world.other.orgId}/api-keys/${world.other.keyId}`, { key: world.own.key, body: 'not json', headers: idem('p-1') });
    expect(foreign.status).to.equal(403);
    const reader = await world.tc.core.apiKeys.issue(OPERATOR, world.own.orgId, { label: 'reader', scopes: ['api_keys:read'] });
    const scoped = await world.api.patch(keyPath(world, world.own.keyId), { key: reader.rawKey, body: 'not json', headers: idem('p-1') });
    expect(scoped.status).to.equal(403);
    expect(scoped.body.details).to.deep.equal([{ field: 'scope', issue: 'requires api_keys:write' }]);
    // The key was never claimed: the owner's PATCH under it runs.
    const own = await world.api.patch(keyPath(world, world.own.keyId), { key: world.own.key, json: { label: 'renamed' }, headers: idem('p-1') });
    expect(own.status).to.equal(200);
    expect(own.headers.get('idempotent-replayed')).to.equal(null);
  });

  it('Idempotency-Key: a repeated PATCH replays its answer and writes one audit entry; another body under it is 422', async () => {
    const path = keyPath(world, world.own.keyId);
    const first = await world.api.patch(path, { key: world.own.key, json: { metadata: { run: '1' } }, headers: idem('patch-1') });
    const again = await world.api.patch(path, { key: world.own.key, json: { metadata: { run: '1' } }, headers: idem('patch-1') });
    expect([first.status, again.status]).to.deep.equal([200, 200]);
    expect(again.text).to.equal(first.text);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    const reused = await world.api.patch(path, { key: world.own.key, json: { metadata: { run: '2' } }, headers: idem('patch-1') });
    expect(reused.status).to.equal(422);
    const entries = await world.tc.store.stores.audit.list({ kind: 'api_key_updated' }, { limit: 10, after: null });
    expect(entries).to.have.length(1);
  });
});

describe('HTTP: per-key networks (C-262..C-266)', () => {
  let world: World;
  afterEach(async () => {
    await world.close();
  });

  async function restrictedKey(w: World, cidrs: string[]): Promise<{ key: string; id: string }> {
    const issued = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'restricted', allowed_cidrs: cidrs });
    return { key: issued.rawKey, id: issued.key.id };
  }

  const orgPath = (w: World): string => `/v1/organisations/${w.own.orgId}`;

  it('C-263: without proxies the socket address decides (IPv4-mapped or not); X-Forwarded-For is ignored; outside is 403 source_address and counts', async () => {
    world = await createWorld();
    const local = await restrictedKey(world, ['127.0.0.0/8']);
    const ok = await world.api.get(orgPath(world), { key: local.key, headers: xff('203.0.113.9') });
    expect(ok.status).to.equal(200);
    const elsewhere = await restrictedKey(world, ['203.0.113.0/24']);
    const refused = await world.api.get(orgPath(world), { key: elsewhere.key, headers: xff('203.0.113.9') });
    expect(refused.status).to.equal(403);
    expect(refused.body).to.deep.equal({
      error: 'FORBIDDEN',
      message: 'This API key may not be used from this address',
      details: [{ field: 'source_address', issue: 'not allowed for this key' }],
    });
    // Counted against the organisation's window like any admitted request (the 200 before it too).
    expect(Number(refused.headers.get('x-ratelimit-remaining'))).to.equal(Number(ok.headers.get('x-ratelimit-remaining')) - 1);
  });

  it('C-263: 401 and 429 come first, then the network, then the scope check', async () => {
    world = await createWorld({ config: { rateLimitPerMinute: 3 } });
    const issued = await world.tc.core.apiKeys.issue(OPERATOR, world.own.orgId, { label: 'narrow', allowed_cidrs: ['192.0.2.0/24'], scopes: ['audit:read'] });
    const path = `/v1/organisations/${world.own.orgId}/api-keys`;
    expect((await world.api.get(path, { key: issued.rawKey })).body.details).to.deep.equal([{ field: 'source_address', issue: 'not allowed for this key' }]);
    await world.tc.core.apiKeys.revoke(OPERATOR, world.own.orgId, issued.key.id);
    expect((await world.api.get(path, { key: issued.rawKey })).status, 'a revoked restricted key').to.equal(401);
    const other = await world.tc.core.apiKeys.issue(OPERATOR, world.own.orgId, { label: 'narrow 2', allowed_cidrs: ['192.0.2.0/24'] });
    expect((await world.api.get(path, { key: other.rawKey })).status).to.equal(403);
    expect((await world.api.get(path, { key: other.rawKey })).status).to.equal(403);
    expect((await world.api.get(path, { key: other.rawKey })).status, 'over the limit: 429 before the network').to.equal(429);
  });

  it('C-266: TRUST_PROXY without TRUSTED_PROXIES believes only the rightmost hop: a spoofed left hop never gets in', async () => {
    world = await createWorld({ http: { trustProxy: true } });
    const office = await restrictedKey(world, ['198.51.100.0/24']);
    expect((await world.api.get(orgPath(world), { key: office.key, headers: xff('198.51.100.7') })).status).to.equal(200);
    // The client wrote the left hop; the proxy appended the real address.
    const spoofed = await world.api.get(orgPath(world), { key: office.key, headers: xff('198.51.100.7, 203.0.113.50') });
    expect(spoofed.status).to.equal(403);
    expect((await world.api.get(orgPath(world), { key: office.key, headers: xff('203.0.113.50, 198.51.100.7') })).status).to.equal(200);
    expect((await world.api.get(orgPath(world), { key: office.key })).status, 'no header: the socket address').to.equal(403);
  });

  it('C-266: with TRUSTED_PROXIES, hops are believed rightmost first while they come from a trusted proxy; a spoofed X-Forwarded-For is not', async () => {
    // The test client connects from 127.0.0.1: the load balancer. 10.0.0.0/8 are the internal proxies.
    world = await createWorld({ http: { trustProxy: true, trustedProxies: ['127.0.0.1', '10.0.0.0/8'] } });
    const office = await restrictedKey(world, ['198.51.100.0/24', '2001:db8::/32']);
    const through = (hops: string) => world.api.get(orgPath(world), { key: office.key, headers: xff(hops) });
    expect((await through('198.51.100.7, 10.1.1.1')).status, 'client, then an internal proxy').to.equal(200);
    expect((await through('[2001:db8::5]:443, 10.1.1.1')).status, 'an IPv6 hop with its port').to.equal(200);
    expect((await through('198.51.100.7:5123')).status, 'an IPv4 hop with its port').to.equal(200);
    expect((await through('198.51.100.7, 203.0.113.50, 10.1.1.1')).status, 'a spoofed hop left of the first untrusted address').to.equal(403);
    expect((await through('198.51.100.7, 10.1.1.1, 10.2.2.2')).status).to.equal(200);
    expect((await through('garbage, 10.1.1.1')).status, 'a hop that is no address').to.equal(403);
  });

  it('C-266: a peer outside TRUSTED_PROXIES is the client whatever X-Forwarded-For says', async () => {
    world = await createWorld({ http: { trustProxy: true, trustedProxies: ['10.0.0.0/8'] } });
    const office = await restrictedKey(world, ['198.51.100.0/24']);
    expect((await world.api.get(orgPath(world), { key: office.key, headers: xff('198.51.100.7') })).status).to.equal(403);
    const local = await restrictedKey(world, ['127.0.0.1/32']);
    expect((await world.api.get(orgPath(world), { key: local.key, headers: xff('198.51.100.7') })).status).to.equal(200);
  });

  it('C-262, C-264, C-265: PATCH of allowed_cidrs normalises, takes effect on the next request, is audited with the networks; a restricted key cannot widen', async () => {
    world = await createWorld();
    const path = `/v1/organisations/${world.own.orgId}/api-keys/${world.own.keyId}`;
    const set = await world.api.patch(path, { key: world.own.key, json: { allowed_cidrs: ['127.0.0.1', '::FFFF:127.0.0.0/104'] } });
    expect(set.status).to.equal(200);
    expect(set.body.allowed_cidrs).to.deep.equal(['127.0.0.1/32', '127.0.0.0/8']);
    expect((await world.api.get(orgPath(world), { key: world.own.key })).status).to.equal(200);
    const moved = await world.api.patch(path, { key: world.own.key, json: { allowed_cidrs: ['127.0.0.2/32'] } });
    expect(moved.status).to.equal(200);
    expect((await world.api.get(orgPath(world), { key: world.own.key })).status, 'from the next request').to.equal(403);
    const widen = await world.api.patch(path, { key: world.platform.key, json: { allowed_cidrs: null } });
    expect(widen.status).to.equal(200);
    const issuedByRestricted = await restrictedKey(world, ['127.0.0.0/8']);
    const wider = await world.api.post(`/v1/organisations/${world.own.orgId}/api-keys`, { key: issuedByRestricted.key, json: { label: 'x', allowed_cidrs: ['0.0.0.0/0'] } });
    expect(wider.status).to.equal(403);
    expect(wider.body.details).to.deep.equal([{ field: 'allowed_cidrs', issue: "must lie within the calling key's allowed_cidrs" }]);
    const inherited = await world.api.post(`/v1/organisations/${world.own.orgId}/api-keys`, { key: issuedByRestricted.key, json: { label: 'child' } });
    expect(inherited.body.allowed_cidrs).to.deep.equal(['127.0.0.0/8']);
    const audit = await world.api.get(`/v1/organisations/${world.own.orgId}/audit-events?limit=100`, { key: world.platform.key });
    const details = audit.body.data.filter((e: { kind: string }) => e.kind === 'api_key_updated').map((e: { detail: unknown }) => e.detail);
    expect(details).to.deep.equal([
      { changed_fields: ['allowed_cidrs'], allowed_cidrs: ['127.0.0.1/32', '127.0.0.0/8'] },
      { changed_fields: ['allowed_cidrs'], allowed_cidrs: ['127.0.0.2/32'] },
      { changed_fields: ['allowed_cidrs'], allowed_cidrs: null },
    ]);
    const issuedEntry = audit.body.data.find((e: { kind: string; key_id: string }) => e.kind === 'api_key_issued' && e.key_id === inherited.body.id);
    expect(issuedEntry.detail).to.deep.equal({ allowed_cidrs: ['127.0.0.0/8'] });
  });
});
