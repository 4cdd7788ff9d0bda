/**
 * C-274: an introspected token's lookup begun alongside its caller's admission. Only a key this
 * admission has admitted to introspect before may start one; it starts in the same synchronous
 * step as the caller's own lookup (so both go in one turn's batch), counts nothing, and is used only
 * for the body's own token when nothing is to be counted.
 */
import { expect } from 'chai';
import {
  Admission,
  DEFAULT_CORE_CONFIG,
  KNOWN_INTROSPECTORS_MAX,
  OPERATOR,
  RateLimiter,
  digestKey,
  introspectionCounterKey,
  silentLogger,
  windowAt,
  type ApiKeyStore,
  type Credential,
  type LookAhead,
  type RateCounter,
} from '@cos/core';
import { InMemoryRateCounter } from '@cos/core/testing';
import { storePorts } from '@cos/core/testing/contracts';
import { CountingApiKeyStore, TEST_SOURCE, fixture, withStore } from './use-cases-fixtures.js';

/** An api-key store that records the digest of every findCredential, in call order. */
class RecordingApiKeyStore extends CountingApiKeyStore {
  readonly digests: string[] = [];
  constructor(inner: ApiKeyStore) {
    super(inner);
  }
  override findCredential(digest: string): Promise<Credential | null> {
    this.digests.push(digest);
    return super.findCredential(digest);
  }
}

async function setup() {
  const f = fixture();
  const platform = await f.org('platform', { isSystem: true, name: 'Platform' });
  const gateway = await f.key(platform.id, { label: 'gateway', scopes: ['keys:introspect'] });
  const tenant = await f.tenant('acme');
  const store = new RecordingApiKeyStore(storePorts(f.store).apiKeys);
  const hits: string[] = [];
  const counter = new InMemoryRateCounter(f.clock);
  const recording: RateCounter = {
    hit: (key, ttlMs) => {
      hits.push(key);
      return counter.hit(key, ttlMs);
    },
  };
  const limiter = new RateLimiter({ counter: recording, clock: f.clock, logger: silentLogger, config: DEFAULT_CORE_CONFIG });
  const admission = new Admission({ stores: withStore(storePorts(f.store), 'apiKeys', store), clock: f.clock }, { limiter });
  /** A tokenAhead that answers the tenant's key and counts its calls. */
  const ahead = Object.assign(
    () => {
      ahead.calls++;
      return tenant.issued.rawKey;
    },
    { calls: 0 },
  );
  return { f, platform, gateway, tenant, store, hits, admission, ahead };
}

describe('C-274: an introspected token looked up alongside its caller', () => {
  it("C-274: a key's first introspection waits for its admission; once admitted to introspect, its next request starts the token's lookup in the same step as its own, and counts only its own request", async () => {
    const { f, gateway, tenant, store, hits, admission, ahead } = await setup();
    const auth = `Bearer ${gateway.rawKey}`;

    const first = await admission.admit(auth, TEST_SOURCE, 'introspection', ahead);
    expect(first.admitted).to.equal(true);
    expect(ahead.calls, 'not known yet: the token is not read').to.equal(0);
    expect(first.admitted && first.lookAhead, 'no lookup begun').to.equal(undefined);

    store.digests.length = 0;
    hits.length = 0;
    const pending = admission.admit(auth, TEST_SOURCE, 'introspection', ahead);
    // Both lookups were made before admit() gave its promise back: one turn, one batch.
    expect(store.digests).to.deep.equal([digestKey(gateway.rawKey), digestKey(tenant.issued.rawKey)]);
    const second = await pending;
    if (!second.admitted) throw new Error('not admitted');
    expect(ahead.calls).to.equal(1);
    const lookAhead = second.lookAhead as LookAhead;
    expect(lookAhead.token).to.equal(tenant.issued.rawKey);
    const found = await lookAhead.inspection;
    if (!found.active) throw new Error('the token is active');
    expect(found.credential.key.id).to.equal(tenant.issued.key.id);
    expect(found.decision, 'nothing counted for the token').to.equal(null);
    const window = windowAt(f.clock.now().getTime()).startMs;
    expect(hits, "the caller's introspection counter only").to.deep.equal([introspectionCounterKey(gateway.key.organisationId, window)]);
  });

  it('C-274: a key without keys:introspect, a malformed header and an unknown key never start a lookup; an introspector refused once (revoked) is forgotten', async () => {
    const { f, gateway, tenant, store, admission, ahead } = await setup();
    for (const header of [`Bearer ${tenant.issued.rawKey}`, `Bearer ${tenant.issued.rawKey}`, 'Bearer nope', undefined, `Bearer svc_live_${'Z'.repeat(48)}`]) {
      await admission.admit(header, TEST_SOURCE, 'introspection', ahead);
    }
    expect(ahead.calls).to.equal(0);

    const auth = `Bearer ${gateway.rawKey}`;
    await admission.admit(auth, TEST_SOURCE, 'introspection', ahead);
    await f.core.apiKeys.revoke(OPERATOR, gateway.key.organisationId, gateway.key.id);
    const refused = await admission.admit(auth, TEST_SOURCE, 'introspection', ahead);
    expect(refused.admitted).to.equal(false);
    expect(ahead.calls, 'still known on its first refusal').to.equal(1);
    store.digests.length = 0;
    expect((await admission.admit(auth, TEST_SOURCE, 'introspection', ahead)).admitted).to.equal(false);
    expect(ahead.calls, 'forgotten after it').to.equal(1);
    expect(store.digests, 'only its own lookup').to.deep.equal([digestKey(gateway.rawKey)]);
  });

  it(`C-274: at most ${KNOWN_INTROSPECTORS_MAX} introspectors are remembered; the one remembered first goes first`, async () => {
    const { f, platform, admission, ahead } = await setup();
    const keys = [];
    for (let i = 0; i <= KNOWN_INTROSPECTORS_MAX; i++) keys.push((await f.key(platform.id, { label: `gateway ${i}`, scopes: ['keys:introspect'] })).rawKey);
    for (const key of keys) await admission.admit(`Bearer ${key}`, TEST_SOURCE, 'introspection', ahead);
    expect(ahead.calls).to.equal(0);
    await admission.admit(`Bearer ${keys.at(-1)!}`, TEST_SOURCE, 'introspection', ahead);
    expect(ahead.calls, 'the last one is known').to.equal(1);
    await admission.admit(`Bearer ${keys[1]!}`, TEST_SOURCE, 'introspection', ahead);
    expect(ahead.calls, 'the second one is still known').to.equal(2);
    await admission.admit(`Bearer ${keys[0]!}`, TEST_SOURCE, 'introspection', ahead);
    expect(ahead.calls, 'the first one went').to.equal(2);
  });

  it("C-274: the introspection uses a look-ahead only for its body's own token and when nothing is to be counted", async () => {
    const { f, gateway, tenant } = await setup();
    const principal = await f.principal(gateway);
    const inactive: LookAhead = { token: tenant.issued.rawKey, inspection: Promise.resolve({ active: false }) };
    expect(await f.core.introspection.introspect(principal, { token: tenant.issued.rawKey }, inactive), 'the same token: its answer').to.deep.equal({ active: false });
    const other: LookAhead = { token: `${tenant.issued.rawKey}x`, inspection: Promise.resolve({ active: false }) };
    expect((await f.core.introspection.introspect(principal, { token: tenant.issued.rawKey }, other)).active, 'another token: looked up now').to.equal(true);
    const counted = await f.core.introspection.introspect(principal, { token: tenant.issued.rawKey, count: true }, inactive);
    expect(counted, 'count: true is looked up and counted now').to.include({ active: true });
    expect(counted.active && counted.rate_limit?.remaining).to.equal(DEFAULT_CORE_CONFIG.rateLimitPerMinute - 1);
  });
});
