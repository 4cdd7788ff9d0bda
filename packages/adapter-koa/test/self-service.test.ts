/**
 * Self-service for organisation owners over HTTP (in-memory core; the same routes over SQLite and
 * Postgres are in system-tests/contract/self-service.test.ts): GET /v1/me. Every response is
 * validated against docs/openapi.yaml by the test client.
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { IDEMPOTENCY_TTL_MS, OPERATOR } from '@cos/core';
import { createWorld, type World } from './support/world.js';

describe('adapter-koa: self-service, GET /v1/me (C-56)', () => {
  let world: World;
  beforeEach(async () => {
    world = await createWorld();
  });
  afterEach(async () => {
    await world.close();
  });

  describe('GET /v1/me', () => {
    it('answers the calling key record and its organisation record, never the raw key or its digest', async () => {
      const res = await world.api.get('/v1/me', { key: world.own.key });
      expect(res.status).to.equal(200);
      expect(Object.keys(res.body).sort()).to.deep.equal(['api_key', 'organisation']);
      expect(res.body.api_key).to.deep.include({ id: world.own.keyId, organisation_id: world.own.orgId, status: 'active', label: 'acme key' });
      expect(res.body.organisation).to.deep.include({ id: world.own.orgId, slug: 'acme', is_system: false });
      expect(res.text).to.not.include(world.own.key);
      expect(res.text).to.not.include(createHash('sha256').update(world.own.key).digest('hex'));
      const org = await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: world.own.key });
      expect(res.body.organisation).to.deep.equal(org.body);
    });

    it('answers a platform key with the system organisation', async () => {
      const res = await world.api.get('/v1/me', { key: world.platform.key });
      expect(res.status).to.equal(200);
      expect(res.body.api_key.id).to.equal(world.platform.keyId);
      expect(res.body.organisation).to.deep.include({ id: world.platform.orgId, is_system: true });
    });

    it('C-32: a revoked, expired or missing key gets 401', async () => {
      for (const key of [world.revokedKey, world.expiredKey]) expect((await world.api.get('/v1/me', { key })).status).to.equal(401);
      expect((await world.api.get('/v1/me')).status).to.equal(401);
    });

    it('C-52: counted against the organisation like every authenticated request', async () => {
      await world.close();
      world = await createWorld({ config: { rateLimitPerMinute: 5 } });
      const first = await world.api.get('/v1/me', { key: world.own.key });
      expect(first.headers.get('x-ratelimit-remaining')).to.equal('4');
      await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: world.own.key });
      const third = await world.api.get('/v1/me', { key: world.own.key });
      expect(third.headers.get('x-ratelimit-remaining')).to.equal('2');
      for (let i = 0; i < 2; i++) await world.api.get('/v1/me', { key: world.own.key });
      expect((await world.api.get('/v1/me', { key: world.own.key })).status).to.equal(429);
    });
  });

  describe('every event carries cause, and matches its schema under `webhooks:` in docs/openapi.yaml', () => {
    it('issued (key), revoked (operator), rolled (key) with its revocation (roll), exposed and revoked (secret scanning)', async () => {
      const { core } = world.tc;
      await core.webhooks.set(OPERATOR, world.own.orgId, 'https://hooks.acme.example/cos');
      const keys = `/v1/organisations/${world.own.orgId}/api-keys`;
      const issued = await world.api.post(keys, { key: world.own.key, json: { label: 'ci' } });
      await core.apiKeys.revoke(OPERATOR, world.own.orgId, issued.body.id);
      const second = await world.api.post(keys, { key: world.own.key, json: { label: 'rolling' } });
      const rolled = await world.api.post(`${keys}/${second.body.id}/roll`, { key: world.own.key, json: { grace_period_seconds: 0 } });
      expect(rolled.status).to.equal(201);
      const third = await world.api.post(keys, { key: world.own.key, json: { label: 'leaky' } });
      await core.secretScanning.report([{ token: third.body.key, type: 'cos_api_key', url: 'https://github.com/a/b', source: 'content' }]);

      const notes = await world.tc.store.stores.outbox.list({ organisationId: world.own.orgId }, { limit: 100, after: null });
      const events = notes.map((n) => JSON.parse(n.payload) as { type: string; data: { key_id: string; cause: unknown } });
      const causes = events.map((e) => [e.type, e.data.key_id, e.data.cause]);
      const byKey = { type: 'api_key', key_id: world.own.keyId };
      expect(causes).to.have.deep.members([
        ['api_key.issued', issued.body.id, byKey],
        ['api_key.revoked', issued.body.id, { type: 'operator' }],
        ['api_key.issued', second.body.id, byKey],
        ['api_key.rolled', second.body.id, byKey],
        ['api_key.revoked', second.body.id, { type: 'roll', new_key_id: rolled.body.id }],
        ['api_key.issued', third.body.id, byKey],
        ['api_key.exposed', third.body.id, { type: 'secret_scanning' }],
        ['api_key.revoked', third.body.id, { type: 'secret_scanning' }],
      ]);
      for (const event of events) {
        const check = world.api.doc.validatorAt(`#/webhooks/${event.type}/post/requestBody/content/application~1json/schema`);
        expect(check(event), `${event.type}: ${JSON.stringify(check.errors)}`).to.equal(true);
      }
      // The schema is strict: an event without cause does not match it.
      const { cause: _cause, ...withoutCause } = events[0]!.data;
      expect(world.api.doc.validatorAt('#/webhooks/api_key.issued/post/requestBody/content/application~1json/schema')({ ...events[0], data: withoutCause })).to.equal(false);
    });
  });

  describe('Idempotency-Key (Stripe semantics) on POST, PUT, PATCH and DELETE', () => {
    const idem = (key: string): Record<string, string> => ({ 'idempotency-key': key });
    const keysOf = (w: World): string => `/v1/organisations/${w.own.orgId}/api-keys`;

    it('a repeat gets the same status and body plus Idempotent-Replayed: true, and nothing is done again', async () => {
      const body = { name: 'Initech', slug: 'initech' };
      const first = await world.api.post('/v1/organisations', { key: world.platform.key, json: body, headers: idem('create-initech') });
      expect(first.status).to.equal(201);
      expect(first.headers.get('idempotent-replayed')).to.equal(null);
      const again = await world.api.post('/v1/organisations', { key: world.platform.key, json: { slug: 'initech', name: 'Initech' }, headers: idem('create-initech') });
      expect(again.status).to.equal(201);
      expect(again.text).to.equal(first.text);
      expect(again.headers.get('location')).to.equal(first.headers.get('location'));
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      const list = await world.api.get('/v1/organisations?limit=100', { key: world.platform.key });
      expect(list.body.data.filter((o: { slug: string }) => o.slug === 'initech')).to.have.length(1);
    });

    it('the same key with another body, path or method is 422 IDEMPOTENCY_KEY_REUSED and changes nothing', async () => {
      await world.api.post(keysOf(world), { key: world.own.key, json: { label: 'one' }, headers: idem('k-1') });
      const before = (await world.api.get(`${keysOf(world)}?limit=100`, { key: world.own.key })).body.data.length;
      const other = await world.api.post(keysOf(world), { key: world.own.key, json: { label: 'two' }, headers: idem('k-1') });
      expect(other.status).to.equal(422);
      expect(other.body).to.deep.equal({
        error: 'IDEMPOTENCY_KEY_REUSED',
        message: 'This Idempotency-Key was already used with a different request (method, path or body); use a new key for a new request',
        details: [],
      });
      const patch = await world.api.patch(`/v1/organisations/${world.own.orgId}`, { key: world.own.key, json: { name: 'x' }, headers: idem('k-1') });
      expect(patch.status).to.equal(422);
      expect((await world.api.get(`${keysOf(world)}?limit=100`, { key: world.own.key })).body.data).to.have.length(before);
      expect((await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: world.own.key })).body.name).to.equal('Acme Compliance');
    });

    it('C-22, C-31: an issued key is never replayed in clear: the replay is the same record without key, with key_replay_unavailable', async () => {
      const first = await world.api.post(keysOf(world), { key: world.own.key, json: { label: 'deploy' }, headers: idem('issue-deploy') });
      expect(first.status).to.equal(201);
      expect(first.body.key).to.match(/^svc_live_/);
      const again = await world.api.post(keysOf(world), { key: world.own.key, json: { label: 'deploy' }, headers: idem('issue-deploy') });
      expect(again.status).to.equal(201);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.headers.get('cache-control')).to.equal('no-store');
      const { key: raw, ...record } = first.body;
      expect(again.body).to.deep.equal({ ...record, key_replay_unavailable: true });
      expect(again.text).to.not.include(raw);
      const kept = await world.tc.store.stores.idempotency.claim({
        organisationId: world.own.orgId, key: 'issue-deploy', fingerprint: '', token: 'peek', now: world.tc.clock.now(),
        expiresAt: world.tc.clock.now(), lockedUntil: world.tc.clock.now(),
      });
      expect(JSON.stringify(kept)).to.not.include(raw).and.not.include(createHash('sha256').update(raw).digest('hex'));
      const labels = (await world.api.get(`${keysOf(world)}?limit=100`, { key: world.own.key })).body.data.map((k: { label: string }) => k.label);
      expect(labels.filter((l: string) => l === 'deploy')).to.have.length(1);
    });

    it('a rolled key is never replayed in clear either; DELETE replays its 204', async () => {
      const issued = await world.api.post(keysOf(world), { key: world.own.key, json: { label: 'old' } });
      const roll = `${keysOf(world)}/${issued.body.id}/roll`;
      const first = await world.api.post(roll, { key: world.own.key, json: { grace_period_seconds: 60 }, headers: idem('roll-1') });
      const again = await world.api.post(roll, { key: world.own.key, json: { grace_period_seconds: 60 }, headers: idem('roll-1') });
      expect([first.status, again.status]).to.deep.equal([201, 201]);
      expect(again.body).to.include({ id: first.body.id, rolled_from: issued.body.id, key_replay_unavailable: true });
      expect(again.body).to.not.have.property('key');
      const del = `${keysOf(world)}/${first.body.id}`;
      const gone = await world.api.delete(del, { key: world.own.key, headers: idem('del-1') });
      const repeat = await world.api.delete(del, { key: world.own.key, headers: idem('del-1') });
      expect([gone.status, repeat.status]).to.deep.equal([204, 204]);
      expect(repeat.headers.get('idempotent-replayed')).to.equal('true');
      expect(repeat.text).to.equal('');
    });

    it('a 4xx answer is kept and replayed; another organisation may use the same key', async () => {
      const bad = await world.api.post(keysOf(world), { key: world.own.key, json: { label: '' }, headers: idem('same') });
      expect(bad.status).to.equal(400);
      const again = await world.api.post(keysOf(world), { key: world.own.key, json: { label: '' }, headers: idem('same') });
      expect(again.status).to.equal(400);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.text).to.equal(bad.text);
      const other = await world.api.post(`/v1/organisations/${world.other.orgId}/api-keys`, { key: world.other.key, json: { label: '' }, headers: idem('same') });
      expect(other.status).to.equal(400);
      expect(other.headers.get('idempotent-replayed')).to.equal(null);
    });

    it('a repeat while the first request still runs is 409 IDEMPOTENCY_KEY_IN_USE; once it has finished, the answer is replayed', async () => {
      const { core } = world.tc;
      const principal = await core.authenticator.authenticate(`Bearer ${world.own.key}`);
      const path = keysOf(world);
      const running = await core.idempotency.begin(principal, 'slow', { method: 'POST', path, body: { label: 'slow' } });
      expect(running.kind).to.equal('started');
      const busy = await world.api.post(path, { key: world.own.key, json: { label: 'slow' }, headers: idem('slow') });
      expect(busy.status).to.equal(409);
      expect(busy.body.error).to.equal('IDEMPOTENCY_KEY_IN_USE');
      if (running.kind !== 'started') return;
      await core.idempotency.finish(running.ticket, { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: '{"done":true}' });
      const done = await world.api.request('POST', path, { key: world.own.key, json: { label: 'slow' }, headers: idem('slow') }).catch((e: Error) => e);
      // The kept answer is what the first request answered (here a hand-made 200 the document does not describe).
      expect(String(done)).to.include('status 200 is not documented');
    });

    it('a 5xx answer is not kept: the key is released and a retry runs again', async () => {
      const { core } = world.tc;
      const principal = await core.authenticator.authenticate(`Bearer ${world.own.key}`);
      const request = { method: 'POST', path: keysOf(world), body: { label: 'x' } };
      const first = await core.idempotency.begin(principal, 'five-hundred', request);
      if (first.kind !== 'started') throw new Error('expected a start');
      await core.idempotency.finish(first.ticket, { status: 500, headers: {}, body: '{}' });
      expect((await core.idempotency.begin(principal, 'five-hundred', request)).kind).to.equal('started');
    });

    it('kept for 24 h: after that the same key runs again, and the sweep deletes expired answers', async () => {
      const first = await world.api.post(keysOf(world), { key: world.own.key, json: { label: 'daily' }, headers: idem('daily') });
      world.tc.clock.advance(IDEMPOTENCY_TTL_MS - 1);
      const within = await world.api.post(keysOf(world), { key: world.own.key, json: { label: 'daily' }, headers: idem('daily') });
      expect(within.body.id).to.equal(first.body.id);
      world.tc.clock.advance(1);
      expect(await world.tc.core.idempotency.sweep()).to.equal(1);
      const after = await world.api.post(keysOf(world), { key: world.platform.key, json: { label: 'daily' }, headers: idem('daily') });
      expect(after.status).to.equal(201);
      expect(after.headers.get('idempotent-replayed')).to.equal(null);
    });

    it('the header must be 1 to 255 printable ASCII characters: 400 with a detail, nothing done', async () => {
      for (const value of ['', 'x'.repeat(256)]) {
        const res = await world.api.post(keysOf(world), { key: world.own.key, json: { label: 'never' }, headers: idem(value) });
        expect(res.status, JSON.stringify(value)).to.equal(400);
        expect(res.body.details).to.deep.equal([{ field: 'idempotency-key', issue: 'must be 1 to 255 printable ASCII characters' }]);
      }
      const ok = await world.api.post(keysOf(world), { key: world.own.key, json: { label: 'edge' }, headers: idem(`~ ${'x'.repeat(253)}`) });
      expect(ok.status).to.equal(201);
      const labels = (await world.api.get(`${keysOf(world)}?limit=100`, { key: world.own.key })).body.data.map((k: { label: string }) => k.label);
      expect(labels).to.not.include('never');
    });

    it('C-33: 403 and body errors come first (a foreign organisation is 403 whatever the key), GET ignores the header', async () => {
      const foreign = await world.api.post(`/v1/organisations/${world.other.orgId}/api-keys`, { key: world.own.key, json: { label: 'x' }, headers: idem('') });
      expect(foreign.status).to.equal(403);
      const get = await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: world.own.key, headers: idem('') });
      expect(get.status).to.equal(200);
    });
  });

  describe('C-130, C-131: authorisation comes before the Idempotency-Key; a kept answer belongs to the calling key', () => {
    const idem = (key: string): Record<string, string> => ({ 'idempotency-key': key });
    const issue = async (orgId: string, scopes?: readonly string[]): Promise<{ key: string; id: string }> => {
      const issued = await world.tc.core.apiKeys.issue(OPERATOR, orgId, { label: 'cast', ...(scopes !== undefined ? { scopes } : {}) });
      return { key: issued.rawKey, id: issued.key.id };
    };

    it('C-130: a read-only key\'s DELETE with Idempotency-Key X is 403 and claims nothing: an admin\'s DELETE with X revokes (204, not a replay), and the reader gets 403 again, never the 204', async () => {
      const reader = await issue(world.own.orgId, ['organisations:read']);
      const victim = await issue(world.own.orgId);
      const path = `/v1/organisations/${world.own.orgId}/api-keys/${victim.id}`;
      const refused = await world.api.delete(path, { key: reader.key, headers: idem('X') });
      expect(refused.status).to.equal(403);
      expect(refused.body.details).to.deep.equal([{ field: 'scope', issue: 'requires api_keys:write' }]);
      const revoked = await world.api.delete(path, { key: world.own.key, headers: idem('X') });
      expect(revoked.status, revoked.text).to.equal(204);
      expect(revoked.headers.get('idempotent-replayed')).to.equal(null);
      expect((await world.api.get('/v1/me', { key: victim.key })).status).to.equal(401);
      const again = await world.api.delete(path, { key: reader.key, headers: idem('X') });
      expect(again.status).to.equal(403);
      expect(again.headers.get('idempotent-replayed')).to.equal(null);
    });

    it('C-130: on every route that takes Idempotency-Key, a refused caller (403) neither claims nor replays; an allowed caller runs, then is replayed', async () => {
      const hook = `/v1/organisations/${world.own.orgId}/webhook-endpoint`;
      const keys = `/v1/organisations/${world.own.orgId}/api-keys`;
      expect((await world.api.put(hook, { key: world.own.key, json: { url: 'https://hooks.acme.example/cos' } })).status).to.equal(201);
      const delivery = (await world.api.post(`${hook}/ping`, { key: world.own.key })).body.notification_id as string;
      const victim = await issue(world.own.orgId);
      const rollable = await issue(world.own.orgId);
      const editable = await issue(world.own.orgId);
      const ownReader = await issue(world.own.orgId, ['organisations:read']);
      const platformReader = await issue(world.platform.orgId, ['organisations:read']);
      const own = { allowed: world.own.key, reader: ownReader.key };
      const platform = { allowed: world.platform.key, reader: platformReader.key };
      const routes = [
        { method: 'POST', template: '/organisations', path: '/v1/organisations', json: { name: 'Initech', slug: 'initech' }, callers: platform, ok: 201 },
        { method: 'PUT', template: '/organisations/{org_id}', path: `/v1/organisations/${world.own.orgId}`, json: { name: 'Renamed Ltd' }, callers: own, ok: 200 },
        { method: 'PATCH', template: '/organisations/{org_id}', path: `/v1/organisations/${world.own.orgId}`, json: { name: 'Patched Ltd' }, callers: own, ok: 200 },
        {
          method: 'PUT',
          template: '/organisations/{org_id}/key-policy',
          path: `/v1/organisations/${world.own.orgId}/key-policy`,
          json: { max_lifetime_seconds: null, allowed_environments: ['live', 'test'], exposure_response: 'revoke_key' },
          callers: platform,
          ok: 200,
        },
        { method: 'PUT', template: '/organisations/{org_id}/rate-limit', path: `/v1/organisations/${world.own.orgId}/rate-limit`, json: { requests_per_minute: 600 }, callers: platform, ok: 200 },
        { method: 'POST', template: '/organisations/{org_id}/api-keys', path: keys, json: { label: 'ci' }, callers: own, ok: 201 },
        { method: 'POST', template: '/organisations/{org_id}/api-keys/{key_id}/roll', path: `${keys}/${rollable.id}/roll`, json: {}, callers: own, ok: 201 },
        { method: 'PATCH', template: '/organisations/{org_id}/api-keys/{key_id}', path: `${keys}/${editable.id}`, json: { label: 'patched' }, callers: own, ok: 200 },
        { method: 'DELETE', template: '/organisations/{org_id}/api-keys/{key_id}', path: `${keys}/${victim.id}`, callers: own, ok: 204 },
        { method: 'PUT', template: '/organisations/{org_id}/webhook-endpoint', path: hook, json: { url: 'https://hooks.acme.example/v2' }, callers: own, ok: 200 },
        { method: 'POST', template: '/organisations/{org_id}/webhook-endpoint/rotate-secret', path: `${hook}/rotate-secret`, json: {}, callers: own, ok: 200 },
        { method: 'POST', template: '/organisations/{org_id}/webhook-endpoint/ping', path: `${hook}/ping`, json: {}, callers: own, ok: 202 },
        {
          method: 'POST',
          template: '/organisations/{org_id}/webhook-endpoint/deliveries/{delivery_id}/redeliver',
          path: `${hook}/deliveries/${delivery}/redeliver`,
          json: {},
          callers: own,
          ok: 202,
        },
        { method: 'DELETE', template: '/organisations/{org_id}/webhook-endpoint', path: hook, callers: own, ok: 204 },
      ];
      // The list is every operation docs/openapi.yaml gives the Idempotency-Key parameter.
      const documented = world.api.doc
        .operations()
        .filter((o) => ((world.api.doc.operation(o)['parameters'] ?? []) as { $ref?: string }[]).some((p) => p.$ref === '#/components/parameters/IdempotencyKey'))
        .map((o) => `${o.method} ${o.template}`);
      expect(routes.map((r) => `${r.method} ${r.template}`)).to.have.members(documented);

      for (const [i, route] of routes.entries()) {
        const name = `${route.method} ${route.template}`;
        const send = (key: string) =>
          world.api.request(route.method, route.path, { key, headers: idem(`every-route-${i}`), ...(route.json !== undefined ? { json: route.json } : {}) });
        const refused = await send(route.callers.reader);
        expect(refused.status, `${name}: ${refused.text}`).to.equal(403);
        const ran = await send(route.callers.allowed);
        expect(ran.status, `${name}: ${ran.text}`).to.equal(route.ok);
        expect(ran.headers.get('idempotent-replayed'), name).to.equal(null);
        const replayed = await send(route.callers.allowed);
        expect([replayed.status, replayed.headers.get('idempotent-replayed')], name).to.deep.equal([route.ok, 'true']);
        const refusedAgain = await send(route.callers.reader);
        expect([refusedAgain.status, refusedAgain.headers.get('idempotent-replayed')], name).to.deep.equal([403, null]);
      }
    });

    it('C-130: a 403 the operation itself answers after the claim (a scope the caller does not hold) is not kept: the claim is released', async () => {
      const writer = await issue(world.own.orgId, ['api_keys:write']);
      const path = `/v1/organisations/${world.own.orgId}/api-keys`;
      const escalation = await world.api.post(path, { key: writer.key, json: { label: 'wider', scopes: ['audit:read'] }, headers: idem('escalate') });
      expect(escalation.status).to.equal(403);
      const again = await world.api.post(path, { key: writer.key, json: { label: 'wider', scopes: ['audit:read'] }, headers: idem('escalate') });
      expect([again.status, again.headers.get('idempotent-replayed')]).to.deep.equal([403, null]);
      const principal = await world.tc.core.authenticator.authenticate(`Bearer ${writer.key}`);
      const free = await world.tc.core.idempotency.begin(principal, 'escalate', { method: 'POST', path, body: { label: 'wider', scopes: ['audit:read'] } });
      expect(free.kind, 'nothing was kept under the key').to.equal('started');
    });

    it('C-131: another key of the same organisation reusing a key value gets 422 and nothing of the kept answer; the first key is still replayed', async () => {
      const colleague = await issue(world.own.orgId);
      const path = `/v1/organisations/${world.own.orgId}/api-keys`;
      const first = await world.api.post(path, { key: world.own.key, json: { label: 'shared' }, headers: idem('shared') });
      expect(first.status).to.equal(201);
      const other = await world.api.post(path, { key: colleague.key, json: { label: 'shared' }, headers: idem('shared') });
      expect(other.status).to.equal(422);
      expect(other.body.error).to.equal('IDEMPOTENCY_KEY_REUSED');
      expect(other.text).to.not.include(first.body.id);
      const replay = await world.api.post(path, { key: world.own.key, json: { label: 'shared' }, headers: idem('shared') });
      expect([replay.status, replay.headers.get('idempotent-replayed'), replay.body.id]).to.deep.equal([201, 'true', first.body.id]);
      const labels = (await world.api.get(`${path}?limit=100`, { key: world.own.key })).body.data.map((k: { label: string }) => k.label);
      expect(labels.filter((l: string) => l === 'shared')).to.have.length(1);
    });
  });

  describe('the organisation\'s webhook endpoint', () => {
    const hook = (w: World): string => `/v1/organisations/${w.own.orgId}/webhook-endpoint`;
    const auditOf = async (w: World, kind: string) => (await w.tc.core.audit.list(OPERATOR, { org: w.own.orgId, kind, limit: '100' })).items;

    it('PUT creates (201, secret once, no-store) then changes (200, never the secret); GET never shows it; each change audited with the key as actor', async () => {
      const created = await world.api.put(hook(world), { key: world.own.key, json: { url: 'https://hooks.acme.example/cos' } });
      expect(created.status).to.equal(201);
      expect(created.headers.get('cache-control')).to.equal('no-store');
      expect(created.body).to.include({ url: 'https://hooks.acme.example/cos', enabled: true });
      expect(created.body.events).to.deep.equal(['*']);
      expect(created.body.secret).to.match(/^whsec_/);
      const changed = await world.api.put(hook(world), { key: world.own.key, json: { url: 'https://hooks.acme.example/v2', events: ['api_key.revoked', 'api_key.exposed'], enabled: false } });
      expect(changed.status).to.equal(200);
      expect(changed.body).to.not.have.property('secret');
      expect(changed.body).to.include({ url: 'https://hooks.acme.example/v2', enabled: false });
      expect(changed.body.events).to.deep.equal(['api_key.exposed', 'api_key.revoked']);
      const got = await world.api.get(hook(world), { key: world.own.key });
      expect(got.body).to.deep.equal(changed.body);
      expect(got.text).to.not.include(created.body.secret.slice(6));
      const entries = await auditOf(world, 'webhook_endpoint_set');
      expect(entries.map((e) => e.actor)).to.deep.equal([{ type: 'api_key', keyId: world.own.keyId }, { type: 'api_key', keyId: world.own.keyId }]);
    });

    it('bad input is 400 with every failing field and changes nothing; an internal URL is refused', async () => {
      const bad = await world.api.put(hook(world), { key: world.own.key, json: { events: ['api_key.nope'], enabled: 'yes', colour: 'red' } });
      expect(bad.status).to.equal(400);
      expect(bad.body.details.map((d: { field: string }) => d.field).sort()).to.deep.equal(['colour', 'enabled', 'events', 'url']);
      const both = await world.api.put(hook(world), { key: world.own.key, json: { url: 'ftp://hooks.acme.example/x', events: [] } });
      expect(both.body.details.map((d: { field: string }) => d.field).sort()).to.deep.equal(['events', 'url']);
      const inside = await world.api.put(hook(world), { key: world.own.key, json: { url: 'https://127.0.0.1/hook' } });
      expect(inside.status).to.equal(400);
      expect(inside.body.details[0].field).to.equal('url');
      expect((await world.api.get(hook(world), { key: world.own.key })).status).to.equal(404);
    });

    it('C-60: GET needs webhooks:read, changes need webhooks:write (403 with the scope detail); another organisation is 403', async () => {
      const { core } = world.tc;
      const readOnly = (await core.apiKeys.issue(OPERATOR, world.own.orgId, { label: 'reader', scopes: ['webhooks:read'] })).rawKey;
      const put = await world.api.put(hook(world), { key: readOnly, json: { url: 'https://hooks.acme.example/cos' } });
      expect(put.status).to.equal(403);
      expect(put.body.details).to.deep.equal([{ field: 'scope', issue: 'requires webhooks:write' }]);
      expect((await world.api.get(hook(world), { key: readOnly })).status).to.equal(404);
      const foreign = await world.api.get(`/v1/organisations/${world.other.orgId}/webhook-endpoint`, { key: world.own.key });
      expect(foreign.status).to.equal(403);
    });

    it('events and enabled decide what is written to the outbox', async () => {
      const outbox = async () => (await world.tc.store.stores.outbox.list({ organisationId: world.own.orgId }, { limit: 100, after: null })).map((n) => n.type);
      const keys = `/v1/organisations/${world.own.orgId}/api-keys`;
      await world.api.put(hook(world), { key: world.own.key, json: { url: 'https://hooks.acme.example/cos', events: ['api_key.revoked'] } });
      const issued = await world.api.post(keys, { key: world.own.key, json: { label: 'quiet' } });
      expect(await outbox()).to.deep.equal([]);
      await world.api.delete(`${keys}/${issued.body.id}`, { key: world.own.key });
      expect(await outbox()).to.deep.equal(['api_key.revoked']);
      await world.api.put(hook(world), { key: world.own.key, json: { url: 'https://hooks.acme.example/cos', events: ['*'], enabled: false } });
      await world.api.post(keys, { key: world.own.key, json: { label: 'disabled' } });
      expect(await outbox()).to.deep.equal(['api_key.revoked']);
    });

    it('rotate-secret: 200 with the new secret and previous_secret_expires_at (default 24 h, 0 at once); overlap_seconds beyond 86400 is 400; audited', async () => {
      await world.api.put(hook(world), { key: world.own.key, json: { url: 'https://hooks.acme.example/cos' } });
      const now = world.tc.clock.now().getTime();
      const rotated = await world.api.post(`${hook(world)}/rotate-secret`, { key: world.own.key });
      expect(rotated.status).to.equal(200);
      expect(rotated.headers.get('cache-control')).to.equal('no-store');
      expect(rotated.body.secret).to.match(/^whsec_/);
      expect(rotated.body.previous_secret_expires_at).to.equal(new Date(now + 86_400_000).toISOString());
      const stored = await world.tc.store.stores.webhooks.get(world.own.orgId);
      expect(stored?.previousSecretExpiresAt?.getTime()).to.equal(now + 86_400_000);
      const instant = await world.api.post(`${hook(world)}/rotate-secret`, { key: world.own.key, json: { overlap_seconds: 0 } });
      expect(instant.body.previous_secret_expires_at).to.equal(null);
      const tooLong = await world.api.post(`${hook(world)}/rotate-secret`, { key: world.own.key, json: { overlap_seconds: 86_401 } });
      expect(tooLong.status).to.equal(400);
      expect(tooLong.body.details).to.deep.equal([{ field: 'overlap_seconds', issue: 'must be an integer from 0 to 86400' }]);
      expect((await auditOf(world, 'webhook_secret_rotated')).map((e) => e.actor)).to.deep.equal([
        { type: 'api_key', keyId: world.own.keyId },
        { type: 'api_key', keyId: world.own.keyId },
      ]);
    });

    it('ping (202, a ping event with its cause), deliveries (list envelope, status filter) and redeliver (202, audited)', async () => {
      expect((await world.api.post(`${hook(world)}/ping`, { key: world.own.key })).status).to.equal(404);
      await world.api.put(hook(world), { key: world.own.key, json: { url: 'https://hooks.acme.example/cos' } });
      const ping = await world.api.post(`${hook(world)}/ping`, { key: world.own.key });
      expect(ping.status).to.equal(202);
      const stored = await world.tc.store.stores.outbox.findById(ping.body.notification_id);
      const payload = JSON.parse(stored!.payload) as unknown;
      expect(payload).to.deep.include({ type: 'ping', data: { organisation_id: world.own.orgId, cause: { type: 'api_key', key_id: world.own.keyId } } });
      const check = world.api.doc.validatorAt('#/webhooks/ping/post/requestBody/content/application~1json/schema');
      expect(check(payload), JSON.stringify(check.errors)).to.equal(true);

      const list = await world.api.get(`${hook(world)}/deliveries`, { key: world.own.key });
      expect(list.status).to.equal(200);
      expect(list.body.data).to.deep.equal([
        { id: ping.body.notification_id, event_type: 'ping', status: 'pending', attempts: 0, last_attempt_at: null, last_error: null, created_at: world.tc.clock.now().toISOString() },
      ]);
      expect(list.body.meta).to.deep.equal({ next_cursor: null });
      expect((await world.api.get(`${hook(world)}/deliveries?status=delivered`, { key: world.own.key })).body.data).to.deep.equal([]);
      expect((await world.api.get(`${hook(world)}/deliveries?status=lost`, { key: world.own.key })).status).to.equal(400);

      // A failed delivery is due again with the same id; a delivered one is sent again under a new id.
      const { outbox } = world.tc.store.stores;
      const now = world.tc.clock.now();
      const [claimed] = await outbox.claimDue(now, new Date(now.getTime() + 60_000), 10, 'lease-1');
      await outbox.complete(claimed!.id, 'lease-1', { status: 'failed', at: now, error: 'answered 500' });
      const again = await world.api.post(`${hook(world)}/deliveries/${ping.body.notification_id}/redeliver`, { key: world.own.key });
      expect(again.status).to.equal(202);
      expect(again.body.notification_id).to.equal(ping.body.notification_id);
      expect((await outbox.findById(ping.body.notification_id))?.status).to.equal('pending');
      const foreign = await world.api.post(`/v1/organisations/${world.own.orgId}/webhook-endpoint/deliveries/3f1c9a52-8d4e-4b7a-9c21-5e6f7a8b9c0d/redeliver`, { key: world.own.key });
      expect(foreign.status).to.equal(404);
      expect((await auditOf(world, 'notification_retried')).map((e) => e.actor)).to.deep.equal([{ type: 'api_key', keyId: world.own.keyId }]);
    });

    it('DELETE removes it (204, audited); an idempotent PUT replays the creation without the secret', async () => {
      const headers = { 'idempotency-key': 'create-hook' };
      const first = await world.api.put(hook(world), { key: world.own.key, json: { url: 'https://hooks.acme.example/cos' }, headers });
      const replay = await world.api.put(hook(world), { key: world.own.key, json: { url: 'https://hooks.acme.example/cos' }, headers });
      expect([first.status, replay.status]).to.deep.equal([201, 201]);
      expect(replay.body).to.not.have.property('secret');
      expect(replay.body.secret_replay_unavailable).to.equal(true);
      expect(replay.text).to.not.include(first.body.secret.slice(6));
      expect((await world.api.delete(hook(world), { key: world.own.key })).status).to.equal(204);
      expect((await world.api.get(hook(world), { key: world.own.key })).status).to.equal(404);
      expect((await auditOf(world, 'webhook_endpoint_removed')).map((e) => e.actor)).to.deep.equal([{ type: 'api_key', keyId: world.own.keyId }]);
    });
  });
});
