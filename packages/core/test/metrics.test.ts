/**
 * The Metrics port as the core uses it: rate-limit decisions by scope kind and outcome
 * (C-50, C-51), fail-open (C-54), authentication failures by a reason that never carries key
 * material (C-31, C-32, C-36), and webhook delivery results (C-59). Without a port, the core's is the
 * no-op one.
 */
import { expect } from 'chai';
import {
  OPERATOR,
  RateLimiter,
  UnauthorizedError,
  WebhookDelivery,
  createCore,
  cryptoRandom,
  DEFAULT_CORE_CONFIG,
  noopMetrics,
  type RateCounter,
  type WebhookResult,
} from '@cos/core';
import { CapturingLogger, FakeClock, InMemoryRateCounter, RecordingMetrics, createInMemoryStore, createTestCore } from '@cos/core/testing';
import { rejectsWith } from './use-cases-fixtures.js';

describe('Metrics port in core', () => {
  it('createCore without a Metrics port uses noopMetrics, which accepts every call', () => {
    const store = createInMemoryStore();
    const core = createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter: new InMemoryRateCounter(new FakeClock()) });
    expect(core.metrics).to.equal(noopMetrics);
    expect(() => {
      noopMetrics.httpRequest('GET', '/v1/health', 200, 0.001);
      noopMetrics.rateLimitDecision('organisation', 'allowed');
      noopMetrics.rateCounterFailOpen();
      noopMetrics.storeError();
      noopMetrics.authFailure('missing');
      noopMetrics.webhookDelivery('delivered');
    }).not.to.throw();
  });

  it('createCore hands its Metrics port to the adapters (core.metrics)', () => {
    const metrics = new RecordingMetrics();
    const { core } = createTestCore({ metrics });
    expect(core.metrics).to.equal(metrics);
  });

  describe('RateLimiter', () => {
    const limiter = (counter: RateCounter, clock: FakeClock, metrics: RecordingMetrics, limit = 2) =>
      new RateLimiter({
        counter,
        clock,
        logger: new CapturingLogger(),
        config: { ...DEFAULT_CORE_CONFIG, rateLimitPerMinute: limit, unauthRateLimitPerMinute: limit, rateCounterTimeoutMs: 20 },
        metrics,
      });

    it('C-50/C-51: counts each decision by scope kind: allowed up to the limit, limited after (also when the scope is remembered as blocked)', async () => {
      const clock = new FakeClock();
      const metrics = new RecordingMetrics();
      const rl = limiter(new InMemoryRateCounter(clock), clock, metrics);
      const org = { kind: 'organisation', organisationId: '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b' } as const;
      for (let i = 0; i < 4; i++) await rl.check(org); // 2 allowed, the 3rd counted, the 4th from the blocked set
      await rl.check({ kind: 'unauthenticated' });
      await rl.check({ kind: 'source', address: '203.0.113.7' });
      await rl.check({ kind: 'secret_scanning' });
      rl.peek(org); // a peek is not a decision
      expect(metrics.of('rateLimitDecision').map((e) => `${e.scope}:${e.decision}`)).to.deep.equal([
        'organisation:allowed',
        'organisation:allowed',
        'organisation:limited',
        'organisation:limited',
        'unauthenticated:allowed',
        'source:allowed',
        'secret_scanning:allowed',
      ]);
      expect(metrics.of('rateCounterFailOpen')).to.have.length(0);
    });

    it('C-54: a failing or hanging counter is counted as a fail-open, and the request as allowed', async () => {
      const clock = new FakeClock();
      const metrics = new RecordingMetrics();
      let mode: 'failing' | 'hanging' = 'failing';
      const counter: RateCounter = {
        hit: () => (mode === 'failing' ? Promise.reject(new Error('ECONNREFUSED')) : new Promise<number>(() => undefined)),
      };
      const rl = limiter(counter, clock, metrics);
      expect((await rl.check({ kind: 'unauthenticated' })).allowed).to.equal(true);
      mode = 'hanging';
      expect((await rl.check({ kind: 'organisation', organisationId: '00000000-0000-4000-8000-000000000000' })).allowed).to.equal(true);
      expect(metrics.of('rateCounterFailOpen')).to.have.length(2);
      expect(metrics.of('rateLimitDecision').map((e) => `${e.scope}:${e.decision}`)).to.deep.equal(['unauthenticated:allowed', 'organisation:allowed']);
    });
  });

  describe('Authenticator', () => {
    it('C-32/C-36: counts each 401 by its reason (missing, malformed, unknown_key, revoked, expired) and nothing on success', async () => {
      const metrics = new RecordingMetrics();
      const { core, clock } = createTestCore({ metrics });
      const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
      const good = await core.apiKeys.issue(OPERATOR, org.id, { label: 'good' });
      const revoked = await core.apiKeys.issue(OPERATOR, org.id, { label: 'revoked' });
      await core.apiKeys.revoke(OPERATOR, org.id, revoked.key.id);
      const expiring = await core.apiKeys.issue(OPERATOR, org.id, { label: 'expiring', expires_at: new Date(clock.now().getTime() + 60_000).toISOString() });
      clock.advance(120_000);
      const unknown = `svc_live_${'A'.repeat(48)}`;

      await core.authenticator.authenticate(`Bearer ${good.rawKey}`);
      expect(metrics.of('authFailure')).to.deep.equal([]);
      const attempts: [string | undefined, string][] = [
        [undefined, 'missing'],
        ['', 'missing'],
        [`Basic ${good.rawKey}`, 'malformed'],
        [`Bearer  ${good.rawKey}`, 'malformed'],
        [`Bearer ${unknown}`, 'unknown_key'],
        [`Bearer ${revoked.rawKey}`, 'revoked'],
        [`Bearer ${expiring.rawKey}`, 'expired'],
      ];
      for (const [header] of attempts) await rejectsWith(core.authenticator.authenticate(header), UnauthorizedError);
      const recorded = metrics.of('authFailure');
      expect(recorded.map((e) => e.reason)).to.deep.equal(attempts.map(([, reason]) => reason));
      // C-31: nothing recorded carries a key, its prefix or a digest.
      const text = JSON.stringify(metrics.events);
      for (const raw of [good.rawKey, revoked.rawKey, expiring.rawKey, unknown]) {
        expect(text).not.to.include(raw);
        expect(text).not.to.include(raw.slice(0, 12));
      }
    });
  });

  describe('WebhookDelivery', () => {
    it('C-59: the core\'s delivery reports each attempt to its Metrics port as delivered, retry or failed', async () => {
      const metrics = new RecordingMetrics();
      const answers: WebhookResult[] = [{ ok: false, error: 'HTTP 500' }, { ok: true, status: 204 }];
      const tc = createTestCore({
        clock: new FakeClock(),
        metrics,
        webhookSender: { send: () => Promise.resolve(answers.shift() ?? { ok: false, error: 'HTTP 500' }) },
        webhookDelivery: { maxAttempts: 2, retryBaseMs: 1_000 },
      });
      const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
      await tc.core.webhooks.set(OPERATOR, org.id, 'https://hooks.example.com/cos');
      const delivery = tc.core.webhookDelivery!;
      expect(delivery).to.be.instanceOf(WebhookDelivery);
      await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'one' }); // enqueues api_key.issued
      expect(await delivery.deliverDue()).to.equal(1); // HTTP 500: retry
      tc.clock.advance(60_000);
      expect(await delivery.deliverDue()).to.equal(1); // 204: delivered
      await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'two' });
      await delivery.deliverDue(); // 500, retry
      tc.clock.advance(60_000);
      await delivery.deliverDue(); // 500 on the last attempt: failed
      expect(metrics.of('webhookDelivery').map((e) => e.result)).to.deep.equal(['retry', 'delivered', 'retry', 'failed']);
    });

    it('C-59: a WebhookDelivery built on its own reports to the Metrics port it is given', async () => {
      const tc = createTestCore({ clock: new FakeClock() });
      expect(tc.core.webhookDelivery, 'no sender given: no delivery').to.equal(null);
      const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
      await tc.core.webhooks.set(OPERATOR, org.id, 'https://hooks.example.com/cos');
      const metrics = new RecordingMetrics();
      const delivery = new WebhookDelivery({
        stores: tc.store.stores,
        sender: { send: () => Promise.resolve({ ok: true, status: 204 }) },
        clock: tc.clock,
        random: cryptoRandom,
        logger: tc.logger,
        metrics,
      });
      await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'one' });
      expect(await delivery.deliverDue()).to.equal(1);
      expect(metrics.of('webhookDelivery').map((e) => e.result)).to.deep.equal(['delivered']);
    });
  });
});
