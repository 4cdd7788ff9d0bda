/**
 * POST /v1/introspect over HTTP (C-270..C-273): who may call it, the answer for an active key and
 * for every other token, `count: true` against the token's organisation (and never the caller's),
 * JSON and form bodies, and the scope that only system organisations' keys may hold. Every response
 * is validated against docs/openapi.yaml by the test client.
 */
import { expect } from 'chai';
import { OPERATOR, digestKey, type Credential } from '@cos/core';
import { createInMemoryStore, type StoreHarness } from '@cos/core/testing';
import { rawRequest } from './support/http.js';
import { createWorld, UNKNOWN_KEY, type World } from './support/world.js';

const PATH = '/v1/introspect';

describe('POST /v1/introspect (C-270, C-271, C-272, C-273)', () => {
  let w: World;
  /** A key of the platform organisation holding keys:introspect (and nothing else). */
  let introspector: string;

  /** Its id. */
  let introspectorId: string;

  beforeEach(async () => {
    w = await createWorld({ config: { rateLimitPerMinute: 5, introspectionRateLimitPerMinute: 1000 } });
    const gateway = await w.tc.core.apiKeys.issue(OPERATOR, w.platform.orgId, { label: 'gateway', scopes: ['keys:introspect'] });
    introspector = gateway.rawKey;
    introspectorId = gateway.key.id;
  });
  afterEach(async () => {
    await w.close();
  });

  const introspect = (body: unknown, key = introspector) => w.api.post(PATH, { key, json: body });

  describe('the answer', () => {
    it('an active key: its record, RFC 7662 names, no exp for a key that never expires', async () => {
      const res = await introspect({ token: w.own.key });
      expect(res.status).to.equal(200);
      const key = await w.tc.core.apiKeys.get(OPERATOR, w.own.orgId, w.own.keyId);
      expect(res.body).to.deep.equal({
        active: true,
        token_type: 'api_key',
        organisation_id: w.own.orgId,
        key_id: w.own.keyId,
        key_prefix: w.own.key.slice(0, 12),
        environment: 'live',
        scope: key.scopes!.join(' '),
        iat: Math.floor(key.createdAt.getTime() / 1000),
        metadata: {},
        rate_limit_per_minute: null,
      });
      expect(res.headers.get('cache-control')).to.equal('no-store');
    });

    it('C-272, C-292: a key with its own limit: the answer carries it, and count: true counts its window first, answering the window with fewer left', async () => {
      const limited = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'limited', rate_limit_per_minute: 2 });
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push((await introspect({ token: limited.rawKey, count: true })).body);
      expect(answers.map((a) => [a.active, a.rate_limit_per_minute, a.rate_limit.limit, a.rate_limit.remaining, a.rate_limited ?? false])).to.deep.equal([
        [true, 2, 2, 1, false],
        [true, 2, 2, 0, false],
        [true, 2, 2, 0, true],
      ]);
    });

    it('a key with an expiry carries exp; a test key says so', async () => {
      const expiresAt = new Date(w.tc.clock.now().getTime() + 3_600_000);
      const issued = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'short', environment: 'test', expires_at: expiresAt.toISOString(), scopes: ['audit:read', 'members:read'] });
      const res = await introspect({ token: issued.rawKey });
      expect(res.body).to.include({ active: true, environment: 'test', scope: 'audit:read members:read', exp: Math.floor(expiresAt.getTime() / 1000) });
    });

    it('unknown, malformed, revoked and expired tokens all get exactly {"active": false}', async () => {
      for (const token of [UNKNOWN_KEY, 'not-a-key', `${w.own.key}x`, w.revokedKey, w.expiredKey, 'svc_live_short']) {
        const res = await introspect({ token });
        expect(res.status, token).to.equal(200);
        expect(res.text, token).to.equal('{"active":false}');
      }
    });

    it('a key revoked after it was introspected is inactive on the next introspection', async () => {
      expect((await introspect({ token: w.own.key })).body.active).to.equal(true);
      await w.tc.core.apiKeys.revoke(OPERATOR, w.own.orgId, w.own.keyId);
      expect((await introspect({ token: w.own.key })).body).to.deep.equal({ active: false });
    });

    it('a key edited after it was introspected is answered with its new record; the same key asked twice gets the same bytes', async () => {
      const first = await introspect({ token: w.own.key });
      expect((await introspect({ token: w.own.key })).text).to.equal(first.text);
      await w.tc.core.apiKeys.update(OPERATOR, w.own.orgId, w.own.keyId, { metadata: { team: 'payments' } });
      const after = await introspect({ token: w.own.key });
      expect(after.body).to.deep.equal({ ...first.body, metadata: { team: 'payments' } });
      expect((await introspect({ token: w.own.key, source_address: '203.0.113.9' })).body).to.deep.equal({ ...after.body, source_address_allowed: true });
      expect((await introspect({ token: w.own.key })).text, 'the record asked with source_address is not kept as the plain one').to.equal(after.text);
    });

    it('the caller may introspect its own key', async () => {
      expect((await introspect({ token: introspector })).body).to.include({ active: true, organisation_id: w.platform.orgId, scope: 'keys:introspect' });
    });
  });

  describe('counting', () => {
    it('without count nothing is counted against the token organisation nor recorded as its use', async () => {
      for (let i = 0; i < 7; i++) expect((await introspect({ token: w.own.key, count: false })).body).to.not.have.property('rate_limit');
      const direct = await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key });
      expect(direct.status).to.equal(200);
      expect(direct.headers.get('x-ratelimit-remaining')).to.equal('4');
    });

    it('count: true counts exactly as a direct request; the window exhausted is rate_limited, the key still active', async () => {
      const first = await introspect({ token: w.own.key, count: true });
      const reset = Math.floor((Math.floor(w.tc.clock.now().getTime() / 60_000) + 1) * 60);
      expect(first.body.rate_limit).to.deep.equal({ limit: 5, remaining: 4, reset });
      expect(first.body).to.not.have.property('rate_limited');
      const direct = await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key });
      expect(direct.headers.get('x-ratelimit-remaining')).to.equal('3');
      for (let i = 0; i < 3; i++) await introspect({ token: w.own.key, count: true });
      const over = await introspect({ token: w.own.key, count: true });
      expect(over.status).to.equal(200);
      expect(over.body).to.include({ active: true, rate_limited: true });
      expect(over.body.rate_limit).to.deep.equal({ limit: 5, remaining: 0, reset });
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status).to.equal(429);
    });

    it('count: true records the key as used, as a direct request does', async () => {
      const fresh = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'never used' });
      await introspect({ token: fresh.rawKey });
      await w.tc.core.keyUsage.flush();
      expect((await w.tc.core.apiKeys.get(OPERATOR, w.own.orgId, fresh.key.id)).lastUsedAt).to.equal(null);
      await introspect({ token: fresh.rawKey, count: true });
      await w.tc.core.keyUsage.flush();
      expect((await w.tc.core.apiKeys.get(OPERATOR, w.own.orgId, fresh.key.id)).lastUsedAt).to.be.instanceOf(Date);
    });

    it('C-272: count: true lands in the key\'s usage counts as a direct request does, answered or rate_limited; without count nothing does', async () => {
      const fresh = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'usage' });
      const usage = async () => {
        await w.tc.core.keyUsage.flush();
        return (await w.api.get(`/v1/organisations/${w.own.orgId}/api-keys/${fresh.key.id}/usage`, { key: w.platform.key })).body.data;
      };
      for (let i = 0; i < 3; i++) await introspect({ token: fresh.rawKey, count: false });
      expect(await usage()).to.deep.equal([]);
      // The organisation's window holds 5: two direct requests and three counted introspections fill it.
      for (let i = 0; i < 2; i++) expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: fresh.rawKey })).status).to.equal(200);
      const answers: boolean[] = [];
      for (let i = 0; i < 5; i++) answers.push((await introspect({ token: fresh.rawKey, count: true })).body.rate_limited === true);
      expect(answers).to.deep.equal([false, false, false, true, true]);
      const hour = w.tc.clock.now().getTime() - (w.tc.clock.now().getTime() % 3_600_000);
      expect(await usage()).to.deep.equal([{ start: new Date(hour).toISOString(), requests: 5, rate_limited: 2 }]);
    });

    it('C-240, C-272: count: true counts against the organisation\'s own limit (its plan), which rate_limit.limit reports', async () => {
      await w.tc.core.rateLimits.replace(OPERATOR, w.own.orgId, { requests_per_minute: 2 });
      const first = await introspect({ token: w.own.key, count: true });
      expect(first.body.rate_limit).to.include({ limit: 2, remaining: 1 });
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).headers.get('x-ratelimit-remaining')).to.equal('0');
      const over = await introspect({ token: w.own.key, count: true });
      expect(over.body).to.include({ active: true, rate_limited: true });
      expect(over.body.rate_limit).to.include({ limit: 2, remaining: 0 });
    });

    it('introspection counts against its own ceiling, never the calling organisation limit', async () => {
      for (let i = 0; i < 8; i++) {
        const res = await introspect({ token: w.own.key });
        expect(res.status).to.equal(200);
        expect(res.headers.get('x-ratelimit-limit')).to.equal('1000');
        expect(res.headers.get('x-ratelimit-remaining')).to.equal(String(999 - i));
      }
      const platformKey = await w.api.get('/v1/organisations', { key: w.platform.key });
      expect(platformKey.headers.get('x-ratelimit-remaining')).to.equal('4');
    });

    it('over its ceiling the caller gets 429', async () => {
      await w.close();
      w = await createWorld({ config: { introspectionRateLimitPerMinute: 2 } });
      introspector = (await w.tc.core.apiKeys.issue(OPERATOR, w.platform.orgId, { label: 'gateway', scopes: ['keys:introspect'] })).rawKey;
      expect((await introspect({ token: w.own.key })).status).to.equal(200);
      expect((await introspect({ token: w.own.key })).status).to.equal(200);
      const refused = await introspect({ token: w.own.key });
      expect(refused.status).to.equal(429);
      expect(refused.headers.get('x-ratelimit-limit')).to.equal('2');
    });
  });

  describe('the caller', () => {
    it('a standard key is 403, a platform key without keys:introspect is 403 naming the scope; no key is 401', async () => {
      const standard = await introspect({ token: w.own.key }, w.own.key);
      expect(standard.status).to.equal(403);
      const platform = await introspect({ token: w.own.key }, w.platform.key);
      expect(platform.status).to.equal(403);
      expect(platform.body.details).to.deep.equal([{ field: 'scope', issue: 'requires keys:introspect' }]);
      expect((await w.api.post(PATH, { json: { token: w.own.key } })).status).to.equal(401);
    });

    it('403 comes before the body is read', async () => {
      const res = await w.api.post(PATH, { key: w.own.key, body: 'garbage', headers: { 'content-type': 'text/plain' } });
      expect(res.status).to.equal(403);
    });
  });

  describe('the body', () => {
    it('form-encoded (RFC 7662 §2.1), count as text', async () => {
      const form = (body: string) => w.api.post(PATH, { key: introspector, body, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      const res = await form(`token=${w.own.key}&count=true&token_type_hint=api_key`);
      expect(res.status).to.equal(200);
      expect(res.body).to.include({ active: true, key_id: w.own.keyId });
      expect(res.body.rate_limit.remaining).to.equal(4);
      expect((await form(`token=${w.revokedKey}`)).body).to.deep.equal({ active: false });
      const twice = await form(`token=${w.own.key}&token=${UNKNOWN_KEY}`);
      expect(twice.status).to.equal(400);
      expect(twice.body.details).to.deep.equal([{ field: 'token', issue: 'must be given once' }]);
      const longName = await form(`token=${w.own.key}&${'x'.repeat(101)}=1`);
      expect(longName.body.details).to.deep.equal([{ field: 'body', issue: 'form field names are at most 100 characters' }]);
      const badCount = await form(`token=${w.own.key}&count=yes`);
      expect(badCount.body.details).to.deep.equal([{ field: 'count', issue: 'must be true or false' }]);
    });

    it('400 with the field for a missing or huge token, a count that is not boolean, a bad source_address, an unknown field', async () => {
      const cases: [unknown, string][] = [
        [{}, 'token'],
        [{ token: '' }, 'token'],
        [{ token: 'x'.repeat(513) }, 'token'],
        [{ token: 42 }, 'token'],
        [{ token: w.own.key, count: 'true' }, 'count'],
        [{ token: w.own.key, source_address: '203.0.113' }, 'source_address'],
        [{ token: w.own.key, source_address: '10.0.0.0/8' }, 'source_address'],
        [{ token: w.own.key, scope: 'x' }, 'scope'],
      ];
      for (const [body, field] of cases) {
        const res = await introspect(body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.details.map((d: { field: string }) => d.field), JSON.stringify(body)).to.deep.equal([field]);
      }
    });

    it('a valid source_address is accepted; for a key without networks it is always allowed', async () => {
      for (const address of ['203.0.113.9', '2001:db8::1', '::ffff:203.0.113.9']) {
        expect((await introspect({ token: w.own.key, source_address: address })).body).to.include({ active: true, source_address_allowed: true });
      }
      expect((await introspect({ token: w.own.key })).body, 'no source_address: no answer for it').to.not.have.property('source_address_allowed');
    });

    it('C-262: source_address_allowed says whether the key\'s networks hold the address (an IPv4-mapped address as its IPv4 form); the key\'s metadata is in the record; an inactive token is still only {"active": false}', async () => {
      const issued = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, {
        label: 'office',
        allowed_cidrs: ['203.0.113.0/24', '2001:db8::/32'],
        metadata: { owner: 'team-payments' },
      });
      const cases: [string, boolean][] = [
        ['203.0.113.9', true],
        ['::ffff:203.0.113.9', true],
        ['2001:db8::1', true],
        ['198.51.100.7', false],
        ['::ffff:198.51.100.7', false],
        ['2001:db9::1', false],
      ];
      for (const [address, allowed] of cases) {
        const res = await introspect({ token: issued.rawKey, source_address: address });
        expect(res.body, address).to.include({ active: true, source_address_allowed: allowed });
        expect(res.body.metadata, address).to.deep.equal({ owner: 'team-payments' });
      }
      await w.tc.core.apiKeys.revoke(OPERATOR, w.own.orgId, issued.key.id);
      expect((await introspect({ token: issued.rawKey, source_address: '198.51.100.7' })).text).to.equal('{"active":false}');
    });

    it('malformed JSON, a body that is not an object, another media type or a compressed body: 400', async () => {
      const raw = (body: string, type: string) => w.api.post(PATH, { key: introspector, body, headers: { 'content-type': type } });
      expect((await raw('{"token":', 'application/json')).body.details).to.deep.equal([{ field: 'body', issue: 'malformed JSON' }]);
      expect((await raw('["x"]', 'application/json')).body.details).to.deep.equal([{ field: 'body', issue: 'must be a JSON object' }]);
      expect((await raw(`token=${w.own.key}`, 'application/json')).status).to.equal(400);
      expect((await raw(JSON.stringify({ token: w.own.key }), 'application/x-www-form-urlencoded')).status).to.equal(400);
      // RFC 7662's invalid_request: 400 naming the header, where the v1 routes answer 415.
      const contentType = [{ field: 'Content-Type', issue: 'must be application/json or application/x-www-form-urlencoded, charset absent or utf-8' }];
      for (const type of ['text/plain', 'application/x-www-form-urlencoded; charset=latin1', 'not a media type']) {
        const res = await raw(`token=${w.own.key}`, type);
        expect(res.status, type).to.equal(400);
        expect(res.body, type).to.include({ error: 'VALIDATION_ERROR' });
        expect(res.body.details, type).to.deep.equal(contentType);
      }
      const untyped = await w.api.post(PATH, { key: introspector, body: `token=${w.own.key}` });
      expect([untyped.status, untyped.body.details]).to.deep.equal([400, contentType]);
      const gzip = await w.api.post(PATH, { key: introspector, body: JSON.stringify({ token: w.own.key }), headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } });
      expect([gzip.status, gzip.body.details]).to.deep.equal([400, [{ field: 'Content-Encoding', issue: 'must be absent or identity: the body is not compressed' }]]);
    });
  });

  describe('C-274: a known introspector (its token looked up alongside its admission)', () => {
    const raw = (body: string, type = 'application/json', key = introspector) => w.api.post(PATH, { key, body, headers: { 'content-type': type } });
    beforeEach(async () => {
      expect((await introspect({ token: w.own.key })).body.active, 'admitted once: now known').to.equal(true);
    });

    it('C-274: every body is answered as before: the active record, {"active": false}, count: true counted once, source_address, a form', async () => {
      expect((await introspect({ token: w.own.key })).body).to.include({ active: true, key_id: w.own.keyId });
      expect((await introspect({ token: w.revokedKey })).text).to.equal('{"active":false}');
      expect((await introspect({ token: w.own.key, count: true })).body.rate_limit.remaining).to.equal(4);
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).headers.get('x-ratelimit-remaining'), 'counted once').to.equal('3');
      expect((await introspect({ token: w.own.key, source_address: '198.51.100.7' })).body).to.include({ active: true, source_address_allowed: true });
      expect((await raw(`token=${w.own.key}`, 'application/x-www-form-urlencoded')).body).to.include({ active: true, key_id: w.own.keyId });
    });

    it('C-274, C-273: a bad body is still its 400, answered after admission', async () => {
      expect((await raw('{"token":')).body.details).to.deep.equal([{ field: 'body', issue: 'malformed JSON' }]);
      expect((await raw('["x"]')).body.details).to.deep.equal([{ field: 'body', issue: 'must be a JSON object' }]);
      expect((await raw(JSON.stringify({ token: '' }))).body.details).to.deep.equal([{ field: 'token', issue: 'must be a string of 1 to 512 characters' }]);
      expect((await raw(`token=${w.own.key}`, 'text/plain')).body.details).to.deep.equal([{ field: 'Content-Type', issue: 'must be application/json or application/x-www-form-urlencoded, charset absent or utf-8' }]);
      const gzip = await w.api.post(PATH, { key: introspector, body: JSON.stringify({ token: w.own.key }), headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } });
      expect([gzip.status, gzip.body.details]).to.deep.equal([400, [{ field: 'Content-Encoding', issue: 'must be absent or identity: the body is not compressed' }]]);
      expect((await introspect({ token: w.own.key })).body.active, 'and the next one is answered').to.equal(true);
    });

    it('C-274, C-33: revoked, its requests are 401 whatever the body, and never answer for the token', async () => {
      await w.tc.core.apiKeys.revoke(OPERATOR, w.platform.orgId, introspectorId);
      for (const res of [await introspect({ token: w.own.key }), await raw('{"token":'), await introspect({ token: w.own.key })]) {
        expect(res.status).to.equal(401);
        expect(res.text).to.not.include('active');
      }
    });
  });

  describe('C-274 over a TCP connection: a body sent with its headers', () => {
    /** Per digest, how many other credential lookups were in flight when its lookup began. */
    let overlaps: Map<string, number[]>;
    let recording: World;
    let gateway: string;

    /** An in-memory store whose findCredential records what else was in flight when each began. */
    function overlapRecordingStore(): StoreHarness {
      const inner = createInMemoryStore();
      const apiKeys = inner.stores.apiKeys;
      let inFlight = 0;
      const recordingKeys = Object.create(apiKeys) as typeof apiKeys;
      recordingKeys.findCredential = async (digest: string): Promise<Credential | null> => {
        overlaps.set(digest, [...(overlaps.get(digest) ?? []), inFlight]);
        inFlight++;
        try {
          return await apiKeys.findCredential(digest);
        } finally {
          inFlight--;
        }
      };
      return { ...inner, stores: { ...inner.stores, apiKeys: recordingKeys } };
    }

    beforeEach(async () => {
      overlaps = new Map();
      recording = await createWorld({ store: overlapRecordingStore(), config: { introspectionRateLimitPerMinute: 1000 } });
      gateway = (await recording.tc.core.apiKeys.issue(OPERATOR, recording.platform.orgId, { label: 'gateway', scopes: ['keys:introspect'] })).rawKey;
    });
    afterEach(async () => {
      await recording.close();
    });

    /** POST /v1/introspect through node:http, which sends the headers and this small body in one write. */
    const overTcp = (body: unknown) => {
      const bytes = Buffer.from(JSON.stringify(body));
      return rawRequest(recording.api, 'POST', PATH, { authorization: `Bearer ${gateway}`, 'content-type': 'application/json', 'content-length': String(bytes.length) }, bytes);
    };

    it("C-274: a known introspector's token is looked up while its own lookup is in flight; its first request, and one that counts, wait for admission", async () => {
      const token = digestKey(recording.own.key);
      const first = await overTcp({ token: recording.own.key });
      expect([first.status, JSON.parse(first.text).active]).to.deep.equal([200, true]);
      expect(overlaps.get(token), 'not known yet: looked up after admission').to.deep.equal([0]);

      const second = await overTcp({ token: recording.own.key });
      expect(JSON.parse(second.text)).to.include({ active: true, key_id: recording.own.keyId });
      expect(overlaps.get(token), "known: begun alongside its caller's lookup").to.deep.equal([0, 1]);

      const counted = await overTcp({ token: recording.own.key, count: true });
      expect(JSON.parse(counted.text).rate_limit).to.be.an('object');
      expect(overlaps.get(token), 'count: true waits for admission').to.deep.equal([0, 1, 0]);
      expect(overlaps.get(digestKey(gateway)), "the caller's own lookups").to.deep.equal([0, 0, 0]);
    });
  });

  describe('keys:introspect is for system organisations only', () => {
    it('asking for it on a standard organisation key is 400 scopes (issue and roll); on a system one it is issued', async () => {
      const both = (await w.tc.core.apiKeys.issue(OPERATOR, w.platform.orgId, { label: 'both', scopes: ['api_keys:write', 'keys:introspect'] })).rawKey;
      const issue = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: both, json: { label: 'no', scopes: ['keys:introspect'] } });
      expect(issue.status).to.equal(400);
      const escalation = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: w.platform.key, json: { label: 'no', scopes: ['keys:introspect'] } });
      expect(escalation.status, 'a key that does not hold it cannot grant it: 403 first').to.equal(403);
      expect(issue.body.details).to.deep.equal([{ field: 'scopes', issue: 'keys:introspect may be held only by keys of a system organisation' }]);
      const mine = await w.api.post(`/v1/organisations/${w.platform.orgId}/api-keys`, { key: both, json: { label: 'gateway 2', scopes: ['keys:introspect'] } });
      expect(mine.status).to.equal(201);
      expect(mine.body.scopes).to.deep.equal(['keys:introspect']);
      const roll = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys/${w.own.keyId}/roll`, { key: w.own.key, json: { scopes: ['keys:introspect'] } });
      expect(roll.status, 'a standard key does not hold it: escalation').to.equal(403);
    });

    it('the operator asking for it on a standard organisation key is 400 too', async () => {
      const err = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'no', scopes: ['keys:introspect'] }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).to.have.property('code', 'VALIDATION_ERROR');
    });

    it('a key issued without scopes by a key holding it inherits it only in a system organisation', async () => {
      const both = (await w.tc.core.apiKeys.issue(OPERATOR, w.platform.orgId, { label: 'both', scopes: ['api_keys:write', 'keys:introspect'] })).rawKey;
      const standard = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: both, json: { label: 'inherits' } });
      expect(standard.status).to.equal(201);
      expect(standard.body.scopes).to.deep.equal(['api_keys:write']);
      const system = await w.api.post(`/v1/organisations/${w.platform.orgId}/api-keys`, { key: both, json: { label: 'inherits' } });
      expect(system.body.scopes).to.deep.equal(['api_keys:write', 'keys:introspect']);
    });

    it('keys issued as in v1 do not hold it', async () => {
      const plain = await w.tc.core.apiKeys.issue(OPERATOR, w.platform.orgId, { label: 'plain' });
      expect(plain.key.scopes).to.not.include('keys:introspect');
    });
  });
});
