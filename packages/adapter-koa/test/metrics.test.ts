/**
 * One observation per request through the core's Metrics port: method, the route
 * template (never the raw path, so ids and keys never become label values), status, seconds.
 * Unknown paths are `unmatched`; 405s carry their template. With the no-op port nothing is observed.
 */
import { expect } from 'chai';
import { RecordingMetrics } from '@cos/core/testing';
import { createWorld, MISSING_ID, UNKNOWN_KEY } from './support/world.js';

describe('adapter-koa: request metrics (Metrics port)', () => {
  it('C-9/C-31: each request is observed with its route template, status and duration; no id or key in any label', async () => {
    const metrics = new RecordingMetrics();
    const world = await createWorld({ metrics, config: { unauthRateLimitPerMinute: 2 } });
    try {
      metrics.clear(); // the set-up's own decisions
      await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: world.own.key });
      await world.api.get(`/v1/organisations/${MISSING_ID}/members`, { key: world.own.key });
      await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: UNKNOWN_KEY });
      await world.api.get(`/v1/nope/${world.own.key}`);
      await world.api.request('DELETE', '/v1/health');
      for (let i = 0; i < 3; i++) await world.api.get('/v1/health'); // the third is over the limit of 2
      const seen = metrics.of('httpRequest').map((e) => `${e.method} ${e.route} ${e.status}`);
      expect(seen).to.deep.equal([
        'GET /v1/organisations/:org_id 200',
        'GET /v1/organisations/:org_id/members 403',
        'GET /v1/organisations/:org_id 401',
        'GET unmatched 404',
        'DELETE /v1/health 405',
        'GET /v1/health 200',
        'GET /v1/health 200',
        'GET /v1/health 429',
      ]);
      for (const e of metrics.of('httpRequest')) expect(e.seconds).to.be.a('number').within(0, 5);
      const text = JSON.stringify(metrics.events);
      for (const secret of [world.own.orgId, MISSING_ID, world.own.key, UNKNOWN_KEY]) expect(text).not.to.include(secret);
      expect(metrics.of('authFailure').map((e) => e.reason)).to.deep.equal(['unknown_key']);
      expect(metrics.of('rateLimitDecision').map((e) => `${e.scope}:${e.decision}`)).to.deep.equal([
        'organisation:allowed',
        'organisation:allowed',
        'source:allowed',
        'unauthenticated:allowed',
        'unauthenticated:allowed',
        'unauthenticated:limited',
      ]);
    } finally {
      await world.close();
    }
  });

  it('without a Metrics port (noopMetrics) the pipeline observes nothing and answers as before', async () => {
    const world = await createWorld();
    try {
      expect((await world.api.get('/v1/health')).status).to.equal(200);
    } finally {
      await world.close();
    }
  });
});
