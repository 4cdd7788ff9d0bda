/**
 * The three embedding examples of docs/embedding.md run, and what they return
 * is what the contract says. The files the doc includes are the very modules imported here.
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import knex from 'knex';
import { main as coreWithSqlStore, createHostKnex } from '../01-core-with-sql-store.js';
import { main as mountRouterInKoa } from '../02-mount-router-in-koa.js';
import { main as buildContainerOverride } from '../03-build-container-override.js';
import { main as customScope } from '../04-custom-scope.js';

const RAW_KEY = /svc_(live|test)_[A-Za-z0-9]{48}/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type CoreResult = Awaited<ReturnType<typeof coreWithSqlStore>>;

function expectCoreWalkthrough(r: CoreResult, dialect: 'sqlite' | 'postgres'): void {
  expect(r.dialect).to.equal(dialect);
  expect(r.migrations).to.deep.equal(['0001_initial', '0002_leaked_keys', '0003_key_lifecycle', '0004_operator_audit', '0005_instance_registry', '0006_delivery_per_endpoint', '0007_webhook_at_rest', '0008_least_privilege', '0009_audit_chain', '0010_idempotency_keys', '0011_webhook_overlap', '0012_audit_rare_kind_index', '0013_redis_identity', '0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
  expect(r.organisation).to.include({ name: 'Acme Ltd', slug: 'acme', industry_section: 'C', is_system: false });
  expect(r.organisation.id).to.match(UUID);
  expect(r.members.data.map((m) => m.email)).to.deep.equal(['ada@acme.example']);
  expect(r.members.meta.next_cursor).to.equal(null);
  expect(r.keys.data).to.have.length(1);
  const [key] = r.keys.data;
  expect(Object.keys(key!).sort()).to.deep.equal(
    [
      'created_at',
      'created_by_key_id',
      'expires_at',
      'id',
      'is_active',
      'key_prefix',
      'label',
      'last_used_at',
      'organisation_id',
      'revoked_at',
      'rolled_from',
      'scopes',
      'status',
      'metadata',
      'allowed_cidrs',
      'rate_limit_per_minute',
    ].sort(),
  );
  expect(key).to.include({ label: 'billing service', is_active: true, status: 'active', organisation_id: r.organisation.id });
  expect(key!.key_prefix).to.match(/^svc_test_[A-Za-z0-9]{3}$/);
  expect(r.revokedKey).to.include({ id: key!.id, is_active: false, status: 'revoked' });
  expect(r.revokedKey.revoked_at).to.be.a('string');
  expect(r.rateLimit).to.deep.equal({ limit: 100, remaining: 99 });
  expect(r.listAsStandardKey).to.equal('FORBIDDEN');
  expect(r.afterRevoke).to.equal('UNAUTHORIZED');
  // Entries of the same millisecond list by their (random) id (C-7), so only the set is fixed here.
  expect(r.audit).to.have.members(['organisation_created', 'organisation_updated', 'member_added', 'api_key_issued', 'api_key_revoked']);
  expect(r.audit).to.have.length(5);
  expect(JSON.stringify(r)).not.to.match(RAW_KEY);
}

describe('examples: embedding (docs/embedding.md)', () => {
  it('example 1 (C-22, C-36, C-40, C-41, spec §5): core use cases on the SQL store over the host\'s SQLite knex, which stays open', async () => {
    const db = createHostKnex();
    try {
      expectCoreWalkthrough(await coreWithSqlStore(db), 'sqlite');
      // The host owns its knex: the example closed its store, the host's connection still answers.
      const rows = (await db.raw('SELECT count(*) AS n FROM organisations')) as Array<{ n: number }>;
      expect(Number(rows[0]!.n)).to.equal(1);
    } finally {
      await db.destroy();
    }
  });

  it('example 1 (C-22, C-36, C-40, C-41): the same walkthrough on a Postgres knex of the host, in its own schema', async function () {
    const url = process.env['TEST_DATABASE_URL'];
    if (url === undefined || url === '') {
      if (process.env['CI'] === 'true') throw new Error('TEST_DATABASE_URL must be set when CI=true');
      this.skip();
    }
    const schema = `cos_example_${randomUUID().replace(/-/g, '')}`;
    const admin = knex({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
    await admin.raw('CREATE SCHEMA ??', [schema]);
    const db = knex({ client: 'pg', connection: url, searchPath: [schema], pool: { min: 0, max: 2 } });
    try {
      expectCoreWalkthrough(await coreWithSqlStore(db), 'postgres');
      const { rows } = (await db.raw('SELECT count(*) AS n FROM organisations')) as { rows: Array<{ n: string }> };
      expect(Number(rows[0]!.n)).to.equal(1);
    } finally {
      await db.destroy();
      await admin.raw('DROP SCHEMA ?? CASCADE', [schema]);
      await admin.destroy();
    }
  });

  it('example 2 (C-1, C-2, C-15, C-52, spec §5.2): /v1 under /compliance in a host Koa app, host middleware in front, host routes behind', async () => {
    const r = await mountRouterInKoa();
    expect(r.health.status).to.equal(200);
    expect(r.health.body.status).to.equal('ok');
    expect(r.created.status).to.equal(201);
    expect(r.created.slug).to.equal('tenant-one');
    expect(r.created.location).to.equal(`/compliance/v1/organisations/${r.fetched.body.id}`);
    expect(r.fetched.status).to.equal(200);
    expect(r.fetched.body).to.include({ name: 'Tenant One', slug: 'tenant-one' });
    expect(r.fetched.servedBy).to.equal('host-app');
    expect(r.fetched.rateLimitLimit).to.equal('60');
    expect(r.fetched.requestId).to.match(UUID);
    expect(r.withoutKey).to.deep.equal({
      status: 401,
      body: { error: 'UNAUTHORIZED', message: 'Missing or invalid API key', details: [] },
    });
    expect(r.hostRoute).to.deep.equal({ status: 200, body: { host: 'ok' } });
    expect(r.logLines.map((l) => [l.message, l.status, l.route])).to.deep.equal([
      ['request completed', 200, '/v1/health'],
      ['request completed', 201, '/v1/organisations'],
      ['request completed', 200, '/v1/organisations/:org_id'],
      ['request completed', 401, '/v1/organisations/:org_id'],
    ]);
    expect(JSON.stringify(r)).not.to.match(RAW_KEY);
  });

  it('example 3 (C-50, C-51, C-52, spec §3 expiry): buildContainer with the host clock drives windows and key expiry', async () => {
    const r = await buildContainerOverride();
    expect(r.createdAt).to.equal('2026-06-10T09:00:30.000Z');
    expect(r.statuses).to.deep.equal([200, 200, 429, 200, 401]);
    expect(r.retryAfter).to.equal(30);
    expect(r.resetOfFirstWindow).to.equal(Date.parse('2026-06-10T09:01:00.000Z') / 1000);
    expect(r.remainingInNextMinute).to.equal(1);
  });
  it('example 4 (C-60): a host route guarded by a scope the host declared; the set stays closed; v1 scopes and host scopes open only their own routes', async () => {
    const r = await customScope();
    expect(r.scopes).to.include('reports:read').and.to.include('organisations:read');
    // The eight built-in scopes, keys:introspect (system organisations' keys only) and the host's one.
    expect(r.scopes).to.have.length(10);
    expect(r.undeclared).to.deep.equal([{ field: 'scopes', issue: 'must be a non-empty array of known scopes without duplicates' }]);
    expect(r.reportWithScope.status).to.equal(200);
    expect(r.reportWithScope.body).to.deep.include({ scopes: ['reports:read'], report: 'all green' });
    expect(r.reportWithoutScope).to.deep.equal({
      status: 403,
      body: { error: 'FORBIDDEN', message: 'This API key does not hold the scope this operation requires', details: [{ field: 'scope', issue: 'requires reports:read' }] },
    });
    expect(r.reportWithoutKey.status).to.equal(401);
    expect(r.organisationWithReportScope.status).to.equal(403);
    expect(r.organisationWithReportScope.body['details']).to.deep.equal([{ field: 'scope', issue: 'requires organisations:read' }]);
    expect(r.organisationWithReadScope.status).to.equal(200);
  });
});
