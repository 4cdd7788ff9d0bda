/**
 * The composition root for embedders: buildContainer binds every port with explicit factories,
 * chooses the store by DATABASE_URL and the limiter by REDIS_URL (C-55), honours overrides, builds
 * the Koa app on demand, and closeContainer releases pools.
 */
import { expect } from 'chai';
import { InProcessRateCounter, OPERATOR, TOKENS, counterKey, silentLogger, type Clock, type Core, type HealthProbe, type RateCounter, type OuterStores, type UnitOfWork } from '@cos/core';
import {
  bindComponent,
  buildContainer,
  closeContainer,
  CLI_TOKENS,
  coreOf,
  limiterOf,
  listen,
  loadConfig,
  makeStoreReady,
  storeOf,
  type HttpApp,
} from '@cos/cli';
import type { SqlStore } from '@cos/store-sql';
import { commandContainer } from '../src/runtime.js';

const fixedClock: Clock = { now: () => new Date('2026-06-10T08:00:00.000Z') };

describe('buildContainer (composition root)', function () {
  this.timeout(20_000);

  it('C-55: without REDIS_URL: SQLite store, in-process counter, the core and the Koa app resolve from the container', async () => {
    const config = loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent' }, { envFile: false });
    const container = await buildContainer(config, { clock: fixedClock, logger: silentLogger });
    try {
      expect(storeOf(container).dialect).to.equal('sqlite');
      expect(limiterOf(container).kind).to.equal('in-process');
      expect(container.get<RateCounter>(TOKENS.RateCounter)).to.equal(limiterOf(container).counter);
      expect(await makeStoreReady(storeOf(container))).to.deep.equal(['0001_initial', '0002_leaked_keys', '0003_key_lifecycle', '0004_operator_audit', '0005_instance_registry', '0006_delivery_per_endpoint', '0007_webhook_at_rest', '0008_least_privilege', '0009_audit_chain', '0010_idempotency_keys', '0011_webhook_overlap', '0012_audit_rare_kind_index', '0013_redis_identity', '0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
      const core = container.get<Core>(TOKENS.Core);
      expect(coreOf(container)).to.equal(core); // singleton
      const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
      expect(org.createdAt.toISOString()).to.equal('2026-06-10T08:00:00.000Z'); // the override reached the core
      const app = await container.getAsync<HttpApp>(CLI_TOKENS.HttpApp);
      const server = await listen(app, '127.0.0.1', 0, silentLogger);
      try {
        const res = await fetch(`${server.url}/v1/version`);
        expect(((await res.json()) as { service_version: string }).service_version).to.equal(container.get(CLI_TOKENS.ServiceVersion));
      } finally {
        expect(await server.stop()).to.deep.equal({ forced: false, inFlight: 0 });
      }
    } finally {
      await closeContainer(container);
    }
    await closeContainer(container); // idempotent
  });

  it('C-55: with REDIS_URL the counter is Redis and closeContainer closes it', async function () {
    const redisUrl = process.env['TEST_REDIS_URL'];
    if (redisUrl === undefined || redisUrl === '') {
      if (process.env['CI'] === 'true') throw new Error('CI=true but TEST_REDIS_URL is not set: the Redis suites must run in CI');
      this.skip();
    }
    const config = loadConfig({ DATABASE_URL: 'sqlite::memory:', REDIS_URL: redisUrl as string }, { envFile: false });
    const container = await buildContainer(config, { logger: silentLogger });
    try {
      const limiter = limiterOf(container);
      expect(limiter.kind).to.equal('redis');
      const scope = `cli-container-test:${Date.now()}:${Math.random()}`;
      // the counter connects in the background; until then a hit rejects (and the core fails open)
      let first: number | undefined;
      for (let attempt = 0; first === undefined && attempt < 100; attempt += 1) {
        first = await Promise.resolve(limiter.counter.hit(counterKey(scope, 0), 60_000)).catch(() => new Promise<undefined>((r) => setTimeout(() => r(undefined), 50)));
      }
      expect(first).to.equal(1);
      expect(await limiter.counter.hit(counterKey(scope, 0), 60_000)).to.equal(2);
      await closeContainer(container);
      let afterClose: unknown;
      await Promise.resolve(limiter.counter.hit(counterKey(scope, 0), 60_000)).catch((e: unknown) => (afterClose = e));
      expect(afterClose, 'a hit after closeContainer').to.be.instanceOf(Error);
    } finally {
      await closeContainer(container);
    }
  });

  it('C-50, C-52: a clock and a rate counter rebound before the first resolution reach every consumer, observed through HTTP', async () => {
    const config = loadConfig({ DATABASE_URL: 'sqlite::memory:', RATE_LIMIT_PER_MINUTE: '2', LOG_LEVEL: 'silent' }, { envFile: false });
    const container = await buildContainer(config, { logger: silentLogger });
    // Rebound after buildContainer, as an embedder would: nothing was built from the defaults yet.
    const clock: Clock = { now: () => new Date('2026-06-10T09:00:30.000Z') };
    const hits: string[] = [];
    const inner = new InProcessRateCounter(clock);
    const counter: RateCounter = { hit: (key, ttlMs) => (hits.push(key), inner.hit(key, ttlMs)) };
    container.rebind(CLI_TOKENS.Clock).toConstantValue(clock);
    container.rebind(CLI_TOKENS.RateCounter).toConstantValue(counter);
    let server: Awaited<ReturnType<typeof listen>> | undefined;
    try {
      await makeStoreReady(container.get(CLI_TOKENS.SqlStore));
      const core = container.get(CLI_TOKENS.Core);
      const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
      const { rawKey } = await core.apiKeys.issue(OPERATOR, org.id, { label: 'rebound' });
      server = await listen(await container.getAsync(CLI_TOKENS.HttpApp), '127.0.0.1', 0, silentLogger);
      const get = () => fetch(`${server!.url}/v1/organisations/${org.id}`, { headers: { authorization: `Bearer ${rawKey}` } });
      const first = await get();
      // The store, the core and the HTTP app all took the rebound clock.
      expect(((await first.json()) as { created_at: string }).created_at).to.equal('2026-06-10T09:00:30.000Z');
      await (await get()).arrayBuffer();
      const limited = await get();
      expect(limited.status).to.equal(429);
      // The window is the rebound clock's minute, counted in the rebound counter.
      expect(Number(limited.headers.get('x-ratelimit-reset'))).to.equal(Date.parse('2026-06-10T09:01:00.000Z') / 1000);
      expect(hits).to.have.length(3);
      expect(container.get(TOKENS.RateCounter)).to.equal(counter);
    } finally {
      await server?.stop();
      await closeContainer(container);
    }
  });

  it('the core is built from the Stores, UnitOfWork and HealthProbe tokens: rebinding them before the first resolution reaches the core', async () => {
    const config = loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent' }, { envFile: false });
    const container = await buildContainer(config, { logger: silentLogger });
    try {
      const store = container.get(CLI_TOKENS.SqlStore);
      await makeStoreReady(store);
      const listed: string[] = [];
      const units: string[] = [];
      const stores: OuterStores = { ...store.stores, organisations: { ...store.stores.organisations, list: (page) => (listed.push('list'), store.stores.organisations.list(page)) } };
      const unitOfWork: UnitOfWork = {
        run: (work) => (units.push('run'), store.unitOfWork.run(work)),
        changeCredentials: (organisationIds, work) => (units.push('changeCredentials'), store.unitOfWork.changeCredentials(organisationIds, work)),
      };
      const health: HealthProbe = { ping: () => Promise.reject(new Error('the rebound probe')) };
      container.rebind(CLI_TOKENS.Stores).toConstantValue(stores);
      container.rebind(CLI_TOKENS.UnitOfWork).toConstantValue(unitOfWork);
      container.rebind(CLI_TOKENS.HealthProbe).toConstantValue(health);
      const core = container.get(CLI_TOKENS.Core);
      await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
      expect(units, 'the rebound unit of work ran the create').to.deep.equal(['run']);
      expect((await core.organisations.list(OPERATOR, {})).items).to.have.length(1);
      expect(listed, 'the rebound stores answered the list').to.deep.equal(['list']);
      expect((await core.health.check()).status, 'the rebound probe answered the health check').to.equal('unavailable');
    } finally {
      await closeContainer(container);
    }
  });

  it('closeContainer closes what was built in the reverse order it was built (dependants first), each once, and builds nothing to close it', async () => {
    const config = loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent' }, { envFile: false });
    const container = await buildContainer(config, { logger: silentLogger });
    const closed: string[] = [];
    // Three components, each built from the one before, each recording its close.
    bindComponent(
      container,
      CLI_TOKENS.SqlStore,
      [],
      () => ({ health: { check: () => Promise.resolve({ status: 'ok' }) } }) as unknown as SqlStore,
      () => void closed.push('store'),
      'rebind',
    );
    bindComponent(container, CLI_TOKENS.HealthProbe, [CLI_TOKENS.SqlStore], (s) => s.health, () => void closed.push('health probe'), 'rebind');
    bindComponent(
      container,
      CLI_TOKENS.Core,
      [CLI_TOKENS.SqlStore, CLI_TOKENS.HealthProbe],
      () => ({ keyUsage: { stop: () => Promise.resolve(void closed.push('core')) } }) as unknown as Core,
      (core) => core.keyUsage.stop(),
      'rebind',
    );
    coreOf(container);
    expect(closed).to.deep.equal([]);
    await closeContainer(container);
    expect(closed).to.deep.equal(['core', 'health probe', 'store']);
    await closeContainer(container);
    expect(closed, 'idempotent').to.have.length(3);
  });

  it("an operator command's container builds only what the command resolves, counts in process and never connects to REDIS_URL", async () => {
    const config = loadConfig({ DATABASE_URL: 'sqlite::memory:', REDIS_URL: 'redis://127.0.0.1:1', OPS_PORT: '0', LOG_LEVEL: 'silent' }, { envFile: false });
    const container = await commandContainer(config, silentLogger);
    try {
      await makeStoreReady(container.get(CLI_TOKENS.SqlStore));
      const core = await container.getAsync(CLI_TOKENS.Core);
      expect((await core.organisations.list(OPERATOR, {})).items).to.deep.equal([]);
      expect(container.get(CLI_TOKENS.RateCounter)).to.be.instanceOf(InProcessRateCounter);
      expect(container.get(CLI_TOKENS.CredentialFreshness)).to.equal(null); // SQLite keeps its own check
      expect(container.get(CLI_TOKENS.PrometheusMetrics)).to.equal(null);
      for (const unused of [CLI_TOKENS.HttpApp, CLI_TOKENS.WebhookDelivery, CLI_TOKENS.ScannerKeyUrl, CLI_TOKENS.NotificationRetention]) {
        expect(container.built, unused.description).to.not.include(unused);
      }
    } finally {
      await closeContainer(container);
    }
  });

  it('C-50: TRUST_PROXY=true makes the Koa app take the client address from X-Forwarded-For; default false', async () => {
    expect(loadConfig({}, { envFile: false }).trustProxy).to.equal(false);
    expect(() => loadConfig({ TRUST_PROXY: 'maybe' }, { envFile: false })).to.throw(/TRUST_PROXY must be true or false/);
    for (const [value, expected] of [['true', true], ['false', false]] as const) {
      const config = loadConfig({ DATABASE_URL: 'sqlite::memory:', TRUST_PROXY: value }, { envFile: false });
      expect(config.trustProxy).to.equal(expected);
      const container = await buildContainer(config, { clock: fixedClock, logger: silentLogger });
      try {
        const app = await container.getAsync<HttpApp>(CLI_TOKENS.HttpApp);
        expect((app as unknown as { proxy: boolean }).proxy).to.equal(expected);
        // serve's listener answers what Node's parser refuses through the adapter (bounds.test.ts).
        expect(app.clientError, 'clientError answer').to.be.a('function');
      } finally {
        await closeContainer(container);
      }
    }
  });

  it('DATABASE_PREPARED_STATEMENTS: default true; false/0/no turn it off; anything else is a ConfigError naming it', () => {
    expect(loadConfig({}, { envFile: false }).databasePreparedStatements).to.equal(true);
    for (const value of ['false', '0', 'no', 'FALSE']) {
      expect(loadConfig({ DATABASE_PREPARED_STATEMENTS: value }, { envFile: false }).databasePreparedStatements, value).to.equal(false);
    }
    expect(() => loadConfig({ DATABASE_PREPARED_STATEMENTS: 'sometimes' }, { envFile: false })).to.throw(
      /DATABASE_PREPARED_STATEMENTS must be true or false/,
    );
  });

  it('a bad DATABASE_URL is a ConfigError naming the variable, before anything is built', () => {
    expect(() => loadConfig({ DATABASE_URL: 'sqlite:' }, { envFile: false })).to.throw(/DATABASE_URL "sqlite:" names no database file/);
  });
});
