import { expect } from 'chai';
import {
  ConflictError,
  ForbiddenError,
  Health,
  OPERATOR,
  OPERATOR_REQUIRED_MESSAGE,
  ValidationError,
  DEFAULT_CORE_CONFIG,
  decodeCursor,
  type HealthProbe,
} from '@cos/core';
import { FakeClock } from '@cos/core/testing';
import { fieldsOf, fixture, rejectsWith } from './use-cases-fixtures.js';

const page = { limit: 100, after: null } as const;

describe('use case: audit trail', () => {
  async function seeded() {
    const f = fixture();
    const a = await f.tenant('a');
    f.clock.advance(1000);
    const b = await f.tenant('b');
    f.clock.advance(1000);
    await f.core.apiKeys.revoke(a.principal, a.org.id, a.issued.key.id);
    return { f, a, b };
  }

  it('C-40: audit list is operator-only; platform and standard keys get 403', async () => {
    const { f, a } = await seeded();
    const { principal } = await f.platform();
    for (const p of [principal, a.principal]) {
      const e = await rejectsWith(f.core.audit.list(p, {}), ForbiddenError);
      expect(e.message).to.equal(OPERATOR_REQUIRED_MESSAGE);
    }
  });

  it('C-41: entries are listed oldest first and filter by organisation and kind', async () => {
    const { f, a } = await seeded();
    const all = await f.core.audit.list(OPERATOR, {});
    // C-7: (occurredAt, id) ascending; entries of one instant are ordered by id.
    const sorted = [...all.items].sort(
      (x, y) => x.occurredAt.getTime() - y.occurredAt.getTime() || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0),
    );
    expect(all.items).to.deep.equal(sorted);
    expect(all.items.map((e) => e.kind)).to.have.members([
      'organisation_created',
      'api_key_issued',
      'organisation_created',
      'api_key_issued',
      'api_key_revoked',
    ]);
    expect(all.items[4]?.kind).to.equal('api_key_revoked');
    expect(all.nextCursor).to.equal(null);
    const ofA = await f.core.audit.list(OPERATOR, { org: a.org.id.toUpperCase() });
    expect(ofA.items.every((e) => e.organisationId === a.org.id)).to.equal(true);
    expect(ofA.items).to.have.length(3);
    const revoked = await f.core.audit.list(OPERATOR, { kind: 'api_key_revoked', org: a.org.id });
    expect(revoked.items.map((e) => e.keyId)).to.deep.equal([a.issued.key.id]);
  });

  it('C-6: audit pages follow (occurredAt, id) cursors', async () => {
    const { f } = await seeded();
    const first = await f.core.audit.list(OPERATOR, { limit: '2' });
    const last = first.items[1]!;
    expect(decodeCursor(first.nextCursor!)).to.deep.equal({ createdAt: last.occurredAt, id: last.id });
    const second = await f.core.audit.list(OPERATOR, { limit: '2', cursor: first.nextCursor });
    const third = await f.core.audit.list(OPERATOR, { limit: '2', cursor: second.nextCursor });
    expect(first.items.length + second.items.length + third.items.length).to.equal(5);
    expect(third.nextCursor).to.equal(null);
  });

  it('a bad org, kind or limit is 400 with all fields', async () => {
    const { f } = await seeded();
    const e = await rejectsWith(f.core.audit.list(OPERATOR, { org: 'acme', kind: 'key_deleted', limit: '1.5' }), ValidationError);
    expect(fieldsOf(e).sort()).to.deep.equal(['kind', 'limit', 'org']);
  });
});

describe('use case: bootstrap', () => {
  it('creates the system organisation and a platform key in one go, recorded as the operator', async () => {
    const f = fixture();
    const result = await f.core.bootstrap.run();
    if (!result.created) expect.fail('expected a new system organisation');
    expect(result.organisation).to.deep.include({ name: 'Platform', slug: 'platform', isSystem: true });
    expect(result.issued.key.label).to.equal('bootstrap');
    expect(result.issued.key.organisationId).to.equal(result.organisation.id);
    const principal = await f.principal(result.issued);
    expect(principal.isPlatform).to.equal(true);
    const entries = await f.store.stores.audit.list({}, page);
    expect(entries.map((e) => [e.kind, e.actor.type])).to.have.deep.members([
      ['organisation_created', 'operator'],
      ['api_key_issued', 'operator'],
    ]);
  });

  it('is idempotent: a second run reports the existing organisation and creates nothing', async () => {
    const f = fixture();
    const first = await f.core.bootstrap.run({ name: 'Ops', slug: 'ops' });
    f.clock.advance(60_000);
    const second = await f.core.bootstrap.run();
    expect(second).to.deep.equal({ created: false, organisation: first.organisation });
    expect(await f.store.stores.organisations.list(page)).to.have.length(1);
    expect(await f.store.stores.apiKeys.list(first.organisation.id, page)).to.have.length(1);
    expect(await f.store.stores.audit.list({}, page)).to.have.length(2);
  });

  it('reports an existing system organisation created by the operator', async () => {
    const f = fixture();
    const system = await f.org('root', { isSystem: true });
    const result = await f.core.bootstrap.run();
    expect(result).to.deep.equal({ created: false, organisation: system });
  });

  it('validates its name and slug (C-13)', async () => {
    const f = fixture();
    const e = await rejectsWith(f.core.bootstrap.run({ slug: '-bad-' }), ValidationError);
    expect(fieldsOf(e)).to.deep.equal(['slug']);
  });

  it('runs in one unit of work: when issuing the key fails, no organisation is left behind', async () => {
    const f = fixture({ config: { maxActiveKeysPerOrg: 0 } });
    await rejectsWith(f.core.bootstrap.run(), ConflictError);
    expect(await f.store.stores.organisations.findFirstSystem()).to.equal(null);
    expect(await f.store.stores.audit.list({}, page)).to.deep.equal([]);
  });

  it('a taken slug surfaces as ConflictError', async () => {
    const f = fixture();
    await f.org('platform');
    const e = await rejectsWith(f.core.bootstrap.run(), ConflictError);
    expect(e.details).to.deep.equal([{ field: 'slug', issue: 'already taken' }]);
  });
});

describe('use case: health', () => {
  const clock = new FakeClock('2026-06-10T12:00:30.123Z');
  const health = (probe: HealthProbe, healthTimeoutMs = 1000) =>
    new Health({ health: probe, clock, config: { ...DEFAULT_CORE_CONFIG, healthTimeoutMs } });

  it('C-4: ok with the clock time in ISO 8601 UTC with a trailing Z when the probe answers', async () => {
    const report = await health({ ping: () => Promise.resolve() }).check();
    expect(report).to.deep.equal({ status: 'ok', timestamp: '2026-06-10T12:00:30.123Z' });
  });

  it('C-4: unavailable when the probe rejects or throws, never throwing itself', async () => {
    expect((await health({ ping: () => Promise.reject(new Error('db down')) }).check()).status).to.equal('unavailable');
    const throwing: HealthProbe = {
      ping: () => {
        throw new Error('sync failure');
      },
    };
    expect((await health(throwing).check()).status).to.equal('unavailable');
  });

  it('C-4: unavailable when the probe does not answer within healthTimeoutMs', async () => {
    const started = process.hrtime.bigint();
    const report = await health({ ping: () => new Promise<void>(() => undefined) }, 30).check();
    const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;
    expect(report.status).to.equal('unavailable');
    expect(elapsedMs).to.be.below(1000);
  });

  it('C-4: the in-memory store is healthy through createCore', async () => {
    const f = fixture();
    expect((await f.core.health.check()).status).to.equal('ok');
  });
});
