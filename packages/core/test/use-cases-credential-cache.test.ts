/**
 * The credential cache and its fence (issue 14, C-36, C-57), on the in-memory store and the
 * in-memory shared counter store, with a FakeClock: two cores over one store and one counter store
 * play two instances. Timings are never asserted; round trips and store reads are counted.
 */
import { expect } from 'chai';
import {
  FENCE_UNAVAILABLE_MESSAGE,
  createCore,
  CREDENTIAL_WRITES,
  OPERATOR,
  UnauthorizedError,
  UnavailableError,
  type ApiKeyStore,
  type Core,
  type Credential,
  type Organisation,
} from '@cos/core';
import { CapturingLogger, createInMemoryStore, FakeClock, InMemoryFreshCounter, IN_MEMORY_CHANGE_BOUND_MS, type StoreHarness } from '@cos/core/testing';
import { CountingApiKeyStore, rejectsWith, withStore } from './use-cases-fixtures.js';

/** Counts findCredential; while held, reads happen at once but their answers wait for release(). */
class GatedApiKeyStore extends CountingApiKeyStore {
  reads = 0;
  private held: (() => void)[] | null = null;
  override async findCredential(digest: string): Promise<Credential | null> {
    this.reads++;
    const answer = await super.findCredential(digest);
    const held = this.held;
    if (held !== null) await new Promise<void>((resolve) => held.push(resolve));
    return answer;
  }
  hold(): void {
    this.held = [];
  }
  release(): void {
    const held = this.held ?? [];
    this.held = null;
    for (const r of held) r();
  }
}

interface Instance {
  readonly core: Core;
  readonly keys: GatedApiKeyStore;
  readonly logger: CapturingLogger;
}

const LIMIT = 30;

describe('use case: credential cache (issue 14, C-36, C-57)', () => {
  let clock: FakeClock;
  let store: StoreHarness;
  let shared: InMemoryFreshCounter;
  let one: Instance;
  let two: Instance;
  let org: Organisation;
  let raw: string;
  let keyId: string;

  function instance(options: { cache?: boolean; maxEntries?: number } = {}): Instance {
    const keys = new GatedApiKeyStore(store.stores.apiKeys);
    const logger = new CapturingLogger();
    const core = createCore({
      stores: withStore(store.stores, 'apiKeys', keys as ApiKeyStore),
      unitOfWork: store.unitOfWork,
      health: store.health,
      counter: shared,
      freshness: shared,
      ...(options.cache !== undefined ? { credentialCache: options.cache } : {}),
      ...(options.maxEntries !== undefined ? { credentialCacheMaxEntries: options.maxEntries } : {}),
      clock,
      logger,
      config: { rateLimitPerMinute: LIMIT },
    });
    return { core, keys, logger };
  }

  const auth = () => `Bearer ${raw}`;
  /** One authenticated request's authentication + count, as the HTTP adapter makes it. */
  async function admit(i: Instance, authorization = auth()): Promise<'ok' | 401 | 429> {
    try {
      const { decision } = await i.core.authenticator.admit(authorization);
      expect(decision, 'admit() counts with the cache on').to.not.equal(undefined);
      return decision!.allowed ? 'ok' : 429;
    } catch (e) {
      if (e instanceof UnauthorizedError) return 401;
      throw e;
    }
  }
  /** Requests until the instance answers from its cache (no store read), within a few requests. */
  async function warm(i: Instance): Promise<void> {
    for (let n = 0; n < 4; n++) {
      const reads = i.keys.reads;
      expect(await admit(i)).to.equal('ok');
      if (i.keys.reads === reads) return;
    }
    throw new Error('the cache never served the key');
  }
  const orgCount = async () => shared.hit(`org:${org.id}`, Math.floor(clock.now().getTime() / 60_000) * 60_000, 120_000);

  beforeEach(async () => {
    clock = new FakeClock();
    store = createInMemoryStore();
    shared = new InMemoryFreshCounter(clock);
    one = instance();
    two = instance();
    org = await one.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    const issued = await one.core.apiKeys.issue(OPERATOR, org.id, { label: 'k' });
    raw = issued.rawKey;
    keyId = issued.key.id;
    // A new counter store answers "not settled" for its change bound: nothing is cached before.
    expect(await admit(two)).to.equal('ok');
    clock.advance(IN_MEMORY_CHANGE_BOUND_MS + 1);
  });

  it('the common case: one counter-store call and no store read per request; expiry without a call', async () => {
    await warm(two);
    const calls = shared.calls;
    const reads = two.keys.reads;
    for (let n = 0; n < 3; n++) expect(await admit(two)).to.equal('ok');
    expect(shared.calls - calls, 'counter-store calls for 3 requests').to.equal(3);
    expect(two.keys.reads - reads, 'store reads').to.equal(0);
  });

  it('C-36: after a revocation on one instance answers, the next request on the other is 401', async () => {
    await warm(two);
    await one.core.apiKeys.revoke(OPERATOR, org.id, keyId);
    expect(await admit(two)).to.equal(401);
    expect(await admit(one)).to.equal(401);
  });

  it('C-57: admit() answers the organisation with the key, from the cache when Redis confirms it fresh, the updated record after a change', async () => {
    await warm(two);
    const reads = two.keys.reads;
    const cached = await two.core.authenticator.admit(auth());
    expect(two.keys.reads, 'served from the cache').to.equal(reads);
    expect(cached.organisation).to.deep.equal(org);
    await one.core.organisations.patch(OPERATOR, org.id, { name: 'Acme Renamed' });
    const after = await two.core.authenticator.admit(auth());
    expect(after.organisation.name).to.equal('Acme Renamed');
    const answer = await two.core.organisations.get(after.principal, org.id, { authenticatedOrganisation: after.organisation });
    expect(answer.name).to.equal('Acme Renamed');
  });

  it('C-57: after an organisation update answers, the other instance serves the new record', async () => {
    await warm(two);
    const principal = await two.core.authenticator.authenticate(auth());
    await one.core.organisations.patch(OPERATOR, org.id, { name: 'Acme Renamed' });
    const { principal: p2 } = await two.core.authenticator.admit(auth());
    expect((await two.core.organisations.get(p2, org.id)).name).to.equal('Acme Renamed');
    expect(principal.organisationId).to.equal(org.id);
  });

  it('C-33, C-50: a stale entry is counted once; a key found revoked is counted nowhere in its organisation', async () => {
    await warm(two);
    const before = await orgCount(); // itself a hit: +1
    await one.core.organisations.patch(OPERATOR, org.id, { name: 'Other' });
    expect(await admit(two)).to.equal('ok'); // stale entry: store read, then one count
    expect(await orgCount()).to.equal(before + 2);
    await one.core.apiKeys.revoke(OPERATOR, org.id, keyId);
    expect(await admit(two)).to.equal(401);
    expect(await orgCount()).to.equal(before + 3);
  });

  it('C-33: over the limit a cached key gets 429 without a store read, and a revoked one 401, never 429', async () => {
    await warm(two);
    let answer: string = 'ok';
    for (let n = 0; n < LIMIT + 2 && answer === 'ok'; n++) answer = String(await admit(two));
    expect(answer).to.equal('429');
    const reads = two.keys.reads;
    expect(await admit(two)).to.equal(429);
    expect(two.keys.reads).to.equal(reads);
    await one.core.apiKeys.revoke(OPERATOR, org.id, keyId);
    expect(await admit(two)).to.equal(401);
  });

  it('C-36: a key that expires is refused at once from the cache (the clock, no call)', async () => {
    const expiring = await one.core.apiKeys.issue(OPERATOR, org.id, { label: 'short', expires_at: new Date(clock.now().getTime() + 60_000).toISOString() });
    raw = expiring.rawKey;
    await warm(two);
    clock.advance(60_001);
    expect(await admit(two)).to.equal(401);
  });

  it('the reader whose store read straddles a revocation never serves the key afterwards (its fill carries the token from before the read)', async () => {
    await warm(one); // instance one knows the organisation's token
    const other = await one.core.apiKeys.issue(OPERATOR, org.id, { label: 'second' });
    two.keys.hold();
    const reading = admit(two, `Bearer ${other.rawKey}`); // reads the row now, answers later
    await one.core.apiKeys.revoke(OPERATOR, org.id, other.key.id); // begin, write, commit, end: "204"
    two.keys.release();
    expect(await reading).to.equal('ok'); // the request was in flight before the 204
    for (let n = 0; n < 3; n++) expect(await admit(two, `Bearer ${other.rawKey}`), `request ${n} after the 204`).to.equal(401);
  });

  it('a read that starts while a change is in progress fills nothing that outlives the change', async () => {
    await warm(two);
    const other = await one.core.apiKeys.issue(OPERATOR, org.id, { label: 'second' });
    await shared.beginChange(org.id, 'manual'); // a writer between its two calls
    expect(await admit(two, `Bearer ${other.rawKey}`)).to.equal('ok');
    expect(await admit(two, `Bearer ${other.rawKey}`)).to.equal('ok');
    await store.stores.apiKeys.revoke(org.id, other.key.id, clock.now()); // its commit
    // Before its end: nobody trusts an entry while the change is in progress.
    expect(await admit(two, `Bearer ${other.rawKey}`)).to.equal(401);
    // And if the end never comes, the marker expires: still no stale answer.
    clock.advance(IN_MEMORY_CHANGE_BOUND_MS + 1);
    expect(await admit(two, `Bearer ${other.rawKey}`)).to.equal(401);
  });

  it('the counter store unreachable: every request reads the store and fails open, writes are 503 and change nothing; back, the cache starts empty', async () => {
    await warm(two);
    shared.failing = true;
    const reads = two.keys.reads;
    expect(await admit(two)).to.equal('ok');
    expect(await admit(two)).to.equal('ok');
    expect(two.keys.reads - reads).to.equal(2);
    const { decision } = await two.core.authenticator.admit(auth());
    expect(decision!.remaining).to.equal(decision!.limit);
    await rejectsWith(one.core.apiKeys.revoke(OPERATOR, org.id, keyId), UnavailableError);
    expect((await one.core.apiKeys.get(OPERATOR, org.id, keyId)).revokedAt).to.equal(null);
    shared.failing = false;
    const afterOutage = two.keys.reads;
    expect(await admit(two)).to.equal('ok');
    expect(two.keys.reads - afterOutage, 'the first request after the outage reads the store').to.equal(1);
  });

  it('C-54: a freshness call that never answers is given up after REDIS_TIMEOUT_MS: the store decides, counting fails open, the cache is dropped', async () => {
    await warm(two);
    const check = shared.check.bind(shared);
    shared.check = () => new Promise(() => undefined); // a frozen Redis
    try {
      const reads = two.keys.reads;
      const started = performance.now();
      const { decision } = await two.core.authenticator.admit(auth());
      expect(performance.now() - started, 'bounded (50 ms + the sweep)').to.be.lessThan(200);
      expect(decision!.remaining).to.equal(decision!.limit);
      expect(two.keys.reads - reads).to.equal(1);
    } finally {
      shared.check = check;
    }
    const reads = two.keys.reads;
    expect(await admit(two)).to.equal('ok');
    expect(two.keys.reads - reads, 'the cache was dropped: the next request reads the store').to.equal(1);
  });

  it('FLUSHALL: no entry is trusted again (new tokens), nothing fills for the change bound, then the cache refills', async () => {
    await warm(two);
    shared.flush();
    const reads = two.keys.reads;
    for (let n = 0; n < 3; n++) expect(await admit(two)).to.equal('ok');
    expect(two.keys.reads - reads).to.equal(3);
    await one.core.apiKeys.revoke(OPERATOR, org.id, keyId);
    expect(await admit(two)).to.equal(401);
  });

  it('an end that cannot be confirmed: 503 although committed, and the other instance does not trust its entry', async () => {
    await warm(two);
    const end = shared.endChange.bind(shared);
    shared.endChange = () => Promise.reject(new Error('lost'));
    try {
      await rejectsWith(one.core.apiKeys.revoke(OPERATOR, org.id, keyId), UnavailableError);
    } finally {
      shared.endChange = end;
    }
    expect(await admit(two)).to.equal(401);
  });

  it('bounded: at most maxEntries entries, the oldest filled goes first', async () => {
    const small = instance({ maxEntries: 2 });
    const raws = [raw];
    for (let n = 0; n < 2; n++) raws.push((await one.core.apiKeys.issue(OPERATOR, org.id, { label: `k${n}` })).rawKey);
    for (const r of raws) for (let n = 0; n < 3; n++) expect(await admit(small, `Bearer ${r}`)).to.equal('ok');
    const reads = small.keys.reads;
    expect(await admit(small, `Bearer ${raws[2]}`)).to.equal('ok');
    expect(small.keys.reads).to.equal(reads);
    expect(await admit(small, `Bearer ${raws[0]}`)).to.equal('ok');
    expect(small.keys.reads).to.equal(reads + 1);
  });

  it('CREDENTIAL_CACHE=off (credentialCache: false): every request reads the store and admit() leaves counting to the rate limiter; writes fence best effort', async () => {
    const off = instance({ cache: false });
    const reads = off.keys.reads;
    const { decision } = await off.core.authenticator.admit(auth());
    expect(decision).to.equal(undefined);
    await off.core.authenticator.admit(auth());
    expect(off.keys.reads - reads).to.equal(2);
    await warm(two);
    await off.core.organisations.patch(OPERATOR, org.id, { name: 'Via the off instance' });
    const { principal } = await two.core.authenticator.admit(auth());
    expect((await two.core.organisations.get(principal, org.id)).name).to.equal('Via the off instance');
    shared.failing = true;
    await off.core.organisations.patch(OPERATOR, org.id, { name: 'Redis down' }); // no 503 with the cache off
  });

  it('issue 16, key roll: the old key\'s shortened expiry reaches the other instance\'s cache at once (shortenExpiry is fenced), and a roll with no grace revokes it there', async () => {
    await warm(two);
    await one.core.apiKeys.roll(OPERATOR, org.id, keyId, { grace_period_seconds: 60 });
    expect(await admit(two)).to.equal('ok'); // within the grace
    await warm(two);
    clock.advance(60_001);
    expect(await admit(two), 'the grace has ended: the cached entry carries the shortened expiry').to.equal(401);
    const other = await one.core.apiKeys.issue(OPERATOR, org.id, { label: 'roll-now' });
    raw = other.rawKey;
    await warm(two);
    await one.core.apiKeys.roll(OPERATOR, org.id, other.key.id, { grace_period_seconds: 0 });
    expect(await admit(two)).to.equal(401);
  });

  it('the fenced writes are one list: revoke, shortenExpiry (key rolling), organisations.update and the key policy (C-62)', () => {
    expect(CREDENTIAL_WRITES).to.deep.equal({ apiKeys: ['revoke', 'shortenExpiry'], organisations: ['update', 'putKeyPolicy'] });
  });

  it('a credential write through the outer stores (outside a unit of work) is fenced too', async () => {
    await warm(two);
    let begun = 0;
    const begin = shared.beginChange.bind(shared);
    shared.beginChange = (o, c) => {
      begun++;
      return begin(o, c);
    };
    const core = createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter: shared, freshness: shared, clock });
    // the Core exposes no outer store; a use case would reach it through deps.stores
    const deps = (core.apiKeys as unknown as { deps: { stores: typeof store.stores } }).deps;
    await deps.stores.apiKeys.revoke(org.id, keyId, clock.now());
    expect(begun).to.equal(1);
    expect(await admit(two)).to.equal(401);
  });

  it('C-57, C-62: a key policy change is a fenced credential change of its organisation: begun before the write, ended after, refused (503, nothing written) when the shared store is unreachable', async () => {
    await warm(two);
    const begun: string[] = [];
    const begin = shared.beginChange.bind(shared);
    shared.beginChange = (o, c) => {
      begun.push(o);
      return begin(o, c);
    };
    const policy = { max_lifetime_seconds: 3_600, allowed_environments: ['live'], exposure_response: 'revoke_key' };
    await one.core.keyPolicies.replace(OPERATOR, org.id, policy);
    expect(begun).to.deep.equal([org.id]);
    expect(await admit(two), 'the change ended: the organisation is settled again, the key still valid').to.equal('ok');
    shared.beginChange = () => Promise.reject(new Error('redis down'));
    const refused = await one.core.keyPolicies.replace(OPERATOR, org.id, { ...policy, max_lifetime_seconds: 7_200 }).then(
      () => null,
      (e: Error) => e,
    );
    expect(refused?.message).to.equal(FENCE_UNAVAILABLE_MESSAGE);
    expect((await one.core.keyPolicies.get(OPERATOR, org.id)).maxLifetimeSeconds).to.equal(3_600);
  });
});
