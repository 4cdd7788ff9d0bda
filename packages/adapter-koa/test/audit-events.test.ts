/**
 * GET /v1/organisations/{org_id}/audit-events over real HTTP (C-63, an extension beyond v1: C-56):
 * the organisation reads its own trail, in chain order, with seq, prev_hash and hash, and can
 * recompute the chain. Every exchange is validated against docs/openapi.yaml
 * (`components/pathItems/ListAuditEvents`).
 */
import { expect } from 'chai';
import { ChainVerifier, GENESIS_HASH, namedOperator, OPERATOR, type ChainRecord } from '@cos/core';
import { MISSING_ID, createWorld, type World } from './support/world.js';

interface Rec extends ChainRecord {
  id: string;
  organisation_id: string;
  kind: string;
  occurred_at: string;
  actor: Record<string, unknown>;
  key_id: string | null;
  key_prefix: string | null;
  detail: Record<string, unknown>;
}

describe('adapter-koa: GET /v1/organisations/{org_id}/audit-events (C-63)', () => {
  let world: World;
  let path: string;
  beforeEach(async () => {
    world = await createWorld();
    path = `/v1/organisations/${world.own.orgId}/audit-events`;
  });
  afterEach(() => world.close());

  const all = async (url: string, key: string, limit = 100): Promise<Rec[]> => {
    const out: Rec[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 50; pages++) {
      const sep = url.includes('?') ? '&' : '?';
      const res = await world.api.get(`${url}${sep}limit=${limit}${cursor !== null ? `&cursor=${cursor}` : ''}`, { key });
      expect(res.status, res.text).to.equal(200);
      out.push(...(res.body.data as Rec[]));
      cursor = res.body.meta.next_cursor as string | null;
      if (cursor === null) return out;
    }
    throw new Error('paging did not end');
  };

  it('C-63: the own organisation reads its trail oldest first (seq 1, 2, …) in the list envelope, and the chain recomputes', async () => {
    const res = await world.api.get(path, { key: world.own.key });
    expect(res.status).to.equal(200);
    expect(Object.keys(res.body)).to.deep.equal(['data', 'meta']);
    const data = res.body.data as Rec[];
    expect(data.map((r) => r.seq)).to.deep.equal(data.map((_, i) => i + 1));
    expect(data.map((r) => r.kind)).to.deep.equal(['organisation_created', 'api_key_issued', 'member_added', 'api_key_issued', 'api_key_revoked', 'api_key_issued']);
    expect(res.body.meta).to.deep.equal({ next_cursor: null });
    expect(data[0]!.prev_hash).to.equal(GENESIS_HASH);
    expect(Object.keys(data[0]!)).to.deep.equal(['id', 'organisation_id', 'seq', 'kind', 'occurred_at', 'actor', 'key_id', 'key_prefix', 'detail', 'prev_hash', 'hash']);
    for (const r of data) expect(r.organisation_id).to.equal(world.own.orgId);
    const v = new ChainVerifier(world.own.orgId);
    for (const r of data) v.push(r);
    expect(v.finish()).to.include({ status: 'ok', entries: 6 });
  });

  it('C-63: actors: a key as {type, key_id}, the operator as {type:"operator"} with the name that was recorded; members by id, never an e-mail address', async () => {
    await world.tc.core.members.add(namedOperator('alice'), world.own.orgId, { email: 'grace@acme.example' });
    const issued = await world.api.post(`/v1/organisations/${world.own.orgId}/api-keys`, { key: world.own.key, json: { label: 'by key' } });
    expect(issued.status).to.equal(201);
    const data = await all(path, world.own.key);
    const member = data.filter((r) => r.kind === 'member_added');
    expect(member.map((r) => r.actor)).to.deep.equal([{ type: 'operator' }, { type: 'operator', name: 'alice' }]);
    for (const r of member) expect(Object.keys(r.detail.member as object)).to.deep.equal(['id']);
    expect(JSON.stringify(data)).to.not.match(/@acme\.example/);
    const byKey = data[data.length - 1]!;
    expect(byKey).to.deep.include({ kind: 'api_key_issued', key_id: issued.body.id, actor: { type: 'api_key', key_id: world.own.keyId } });
    expect(JSON.stringify(data)).to.not.include(issued.body.key);
  });

  it('C-5, C-6: pages of any size visit every entry once; entries appended while paging come after the cursor', async () => {
    const first = await world.api.get(`${path}?limit=4`, { key: world.own.key });
    expect(first.body.data.map((r: Rec) => r.seq)).to.deep.equal([1, 2, 3, 4]);
    expect(first.body.meta.next_cursor).to.be.a('string');
    await world.tc.core.organisations.patch(OPERATOR, world.own.orgId, { name: 'Acme Renamed' });
    const second = await world.api.get(`${path}?limit=4&cursor=${first.body.meta.next_cursor}`, { key: world.own.key });
    expect(second.body.data.map((r: Rec) => [r.seq, r.kind])).to.deep.equal([
      [5, 'api_key_revoked'],
      [6, 'api_key_issued'],
      [7, 'organisation_updated'],
    ]);
    expect(second.body.meta.next_cursor).to.equal(null);
    expect((await all(path, world.own.key, 1)).map((r) => r.seq)).to.deep.equal([1, 2, 3, 4, 5, 6, 7]);
  });

  it('C-63: filters: kind, since (inclusive) and until (exclusive) on occurred_at, combined with paging', async () => {
    const start = world.tc.clock.now();
    world.tc.clock.advance(60_000);
    const mid = world.tc.clock.now();
    await world.tc.core.organisations.patch(OPERATOR, world.own.orgId, { name: 'Later' });
    world.tc.clock.advance(60_000);
    await world.tc.core.organisations.patch(OPERATOR, world.own.orgId, { name: 'Latest' });
    const issued = await all(`${path}?kind=api_key_issued`, world.own.key, 2);
    expect(issued.map((r) => r.seq)).to.deep.equal([2, 4, 6]);
    const since = await all(`${path}?since=${mid.toISOString()}`, world.own.key);
    expect(since.map((r) => [r.seq, r.kind])).to.deep.equal([
      [7, 'organisation_updated'],
      [8, 'organisation_updated'],
    ]);
    const window = await all(`${path}?since=${encodeURIComponent(start.toISOString())}&until=${encodeURIComponent(new Date(mid.getTime() + 1).toISOString())}&kind=organisation_updated`, world.own.key);
    expect(window.map((r) => r.seq)).to.deep.equal([7]);
  });

  it('C-5, C-6: bad filters are 400 VALIDATION_ERROR with one detail per field, all at once', async () => {
    const res = await world.api.get(`${path}?limit=0&cursor=%21%21&kind=nope&since=yesterday&until=2026-01-01`, { key: world.own.key });
    expect(res.status).to.equal(400);
    expect(res.body.error).to.equal('VALIDATION_ERROR');
    expect(res.body.details.map((d: { field: string }) => d.field)).to.deep.equal(['limit', 'cursor', 'kind', 'since', 'until']);
    const order = await world.api.get(`${path}?since=2026-06-10T12:00:00Z&until=2026-06-10T11:00:00Z`, { key: world.own.key });
    expect(order.status).to.equal(400);
    expect(order.body.details).to.deep.equal([{ field: 'until', issue: 'must be later than since' }]);
    const otherCursor = Buffer.from(JSON.stringify(['2026-06-10T12:00:00.000Z', MISSING_ID])).toString('base64url');
    const wrongKind = await world.api.get(`${path}?cursor=${otherCursor}`, { key: world.own.key });
    expect(wrongKind.status, 'a cursor of another list does not decode').to.equal(400);
    expect(wrongKind.body.details).to.deep.equal([{ field: 'cursor', issue: 'invalid cursor' }]);
  });

  it('C-34, C-33: another organisation is 403 for a standard key (existing or not, even with bad filters); a platform key reads any; 404 for none; 401 without a key', async () => {
    const theirs = `/v1/organisations/${world.other.orgId}/audit-events`;
    expect((await world.api.get(theirs, { key: world.own.key })).status).to.equal(403);
    expect((await world.api.get(`${theirs}?limit=0&kind=nope`, { key: world.own.key })).status).to.equal(403);
    expect((await world.api.get(`/v1/organisations/${MISSING_ID}/audit-events`, { key: world.own.key })).status).to.equal(403);
    const platform = await world.api.get(theirs, { key: world.platform.key });
    expect(platform.status).to.equal(200);
    expect(platform.body.data.map((r: Rec) => r.organisation_id)).to.deep.equal(Array(platform.body.data.length).fill(world.other.orgId));
    expect((await world.api.get(`/v1/organisations/${MISSING_ID}/audit-events`, { key: world.platform.key })).status).to.equal(404);
    const notUuid = await world.api.get('/v1/organisations/not-a-uuid/audit-events', { key: world.platform.key });
    expect(notUuid.status).to.equal(400);
    expect(notUuid.body.details).to.deep.equal([{ field: 'org_id', issue: 'must be a UUID' }]);
    expect((await world.api.get(path)).status).to.equal(401);
    expect((await world.api.post(path, { key: world.own.key, json: {} })).status, 'read-only').to.equal(405);
  });
});
