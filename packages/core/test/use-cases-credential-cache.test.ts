/**
 * The credential cache and its fence (C-36, C-57), on the in-memory store and the
 * in-memory shared counter store, with a FakeClock: two cores over one store and one counter store
 * play two instances. Timings are never asserted; round trips and store reads are counted.
 */
import { expect } from 'chai';
import {
  counterKey,
  EXPOSURE_ATTEMPTS,
  EXPOSURE_LINEAGE_CHANGING_MESSAGE,
  FENCE_UNAVAILABLE_MESSAGE,
  createCore,
  freshnessKeys,
  FENCE_END_UNANNOUNCED_WARNING,
  OPERATOR,
  UndeclaredCredentialChangeError,
  UnauthorizedError,
  UnavailableError,
  ConflictError,
  isDomainErrorWithCode,
  type ApiKeyStore,
  type Core,
  type Organisation,
  type Stores,
  type UnitOfWork,
} from '@cos/core';
import { CapturingLogger, createInMemoryStore, FakeClock, InMemoryFreshCounter, IN_MEMORY_CHANGE_BOUND_MS, type StoreHarness } from '@cos/core/testing';
import { GatedApiKeyStore, TEST_SOURCE, admitted, rejectsWith, withStore } from './use-cases-fixtures.js';
import { storePorts } from '@cos/core/testing/contracts';

interface Instance {
  readonly core: Core;
  readonly keys: GatedApiKeyStore;
  readonly logger: CapturingLogger;
}

const LIMIT = 30;

describe('use case: credential cache (C-36, C-57)', () => {
  let clock: FakeClock;
  let store: StoreHarness;
  let shared: InMemoryFreshCounter;
  let one: Instance;
  let two: Instance;
  let org: Organisation;
  let raw: string;
  let keyId: string;

  function instance(options: { cache?: boolean; maxEntries?: number; lease?: { epoch(): number | null } } = {}): Instance {
    const keys = new GatedApiKeyStore(storePorts(store).apiKeys);
    const logger = new CapturingLogger();
    const core = createCore({
      stores: withStore(storePorts(store), 'apiKeys', keys as ApiKeyStore),
      unitOfWork: store.unitOfWork,
      health: store.health,
      counter: shared,
      freshness: shared,
      ...(options.cache !== undefined ? { fenceMode: options.cache ? ('cache' as const) : ('best-effort' as const) } : {}),
      ...(options.maxEntries !== undefined ? { credentialCacheMaxEntries: options.maxEntries } : {}),
      ...(options.lease !== undefined ? { credentialCacheLease: options.lease } : {}),
      clock,
      logger,
      config: { rateLimitPerMinute: LIMIT },
    });
    return { core, keys, logger };
  }

  const auth = () => `Bearer ${raw}`;
  /** One authenticated request's authentication + count, as the HTTP adapter makes it. */
  async function admit(i: Instance, authorization = auth()): Promise<'ok' | 401 | 429> {
    const answer = await i.core.admission.admit(authorization, TEST_SOURCE);
    if (!answer.admitted) {
      expect(answer.refusal).to.be.instanceOf(UnauthorizedError);
      return 401;
    }
    return answer.decision.allowed ? 'ok' : 429;
  }
  /** Requests until the instance answers from its cache (no store read), within a few requests. */
  async function warm(i: Instance, authorization = auth()): Promise<void> {
    for (let n = 0; n < 4; n++) {
      const reads = i.keys.reads;
      expect(await admit(i, authorization)).to.equal('ok');
      if (i.keys.reads === reads) return;
    }
    throw new Error('the cache never served the key');
  }
  const orgCount = async () => shared.hit(counterKey(`org:${org.id}`, Math.floor(clock.now().getTime() / 60_000) * 60_000), 120_000);

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
    const cached = await admitted(two.core, auth());
    expect(two.keys.reads, 'served from the cache').to.equal(reads);
    expect(cached.organisation).to.deep.equal(org);
    await one.core.organisations.patch(OPERATOR, org.id, { name: 'Acme Renamed' });
    const after = await admitted(two.core, auth());
    expect(after.organisation.name).to.equal('Acme Renamed');
    const answer = await two.core.organisations.get(after.principal, org.id, { authenticatedOrganisation: after.organisation });
    expect(answer.name).to.equal('Acme Renamed');
  });

  it('C-57: after an organisation update answers, the other instance serves the new record', async () => {
    await warm(two);
    const principal = await two.core.authenticator.authenticate(auth());
    await one.core.organisations.patch(OPERATOR, org.id, { name: 'Acme Renamed' });
    const { principal: p2 } = await admitted(two.core, auth());
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
    await shared.beginChange(freshnessKeys(org.id), 'manual'); // a writer between its two calls
    expect(await admit(two, `Bearer ${other.rawKey}`)).to.equal('ok');
    expect(await admit(two, `Bearer ${other.rawKey}`)).to.equal('ok');
    await storePorts(store).apiKeys.revoke(org.id, other.key.id, clock.now()); // its commit
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
    const { decision } = await admitted(two.core, auth());
    expect(decision!.remaining).to.equal(decision!.limit);
    await rejectsWith(one.core.apiKeys.revoke(OPERATOR, org.id, keyId), UnavailableError);
    expect((await one.core.apiKeys.get(OPERATOR, org.id, keyId)).revokedAt).to.equal(null);
    shared.failing = false;
    const afterOutage = two.keys.reads;
    expect(await admit(two)).to.equal('ok');
    expect(two.keys.reads - afterOutage, 'the first request after the outage reads the store').to.equal(1);
  });

  it('C-54, C-151: a freshness call that never answers is given up after REDIS_TIMEOUT_MS: the store decides and counting fails open for that request only; the cache keeps its entries, and a revocation is still refused on the next request', async () => {
    await warm(two);
    const check = shared.check.bind(shared);
    shared.check = () => new Promise(() => undefined); // a frozen Redis
    try {
      const reads = two.keys.reads;
      const started = performance.now();
      const { decision } = await admitted(two.core, auth());
      expect(performance.now() - started, 'bounded (50 ms + the sweep)').to.be.lessThan(200);
      expect(decision!.remaining).to.equal(decision!.limit);
      expect(two.keys.reads - reads).to.equal(1);
    } finally {
      shared.check = check;
    }
    const reads = two.keys.reads;
    expect(await admit(two)).to.equal('ok');
    expect(two.keys.reads - reads, 'the late call cost its own lookup only: the next request is served from the cache').to.equal(0);
    await one.core.apiKeys.revoke(OPERATOR, org.id, keyId);
    expect(await admit(two), 'the entry kept through the late call is refused on the next request after the revocation').to.equal(401);
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

  it("C-57: an end that cannot be confirmed after the commit: the write answers its success (a roll's new key works, revocation and classify too), a warning is logged, and the other instance serves no old state, before or after the marker expires", async () => {
    await warm(two);
    const rollable = await one.core.apiKeys.issue(OPERATOR, org.id, { label: 'to roll' });
    for (let n = 0; n < 3; n++) expect(await admit(two, `Bearer ${rollable.rawKey}`)).to.equal('ok'); // cached on two
    const end = shared.endChange.bind(shared);
    let ends = 0;
    shared.endChange = () => {
      ends++;
      return Promise.reject(new Error('lost between commit and confirmation'));
    };
    let rolled: Awaited<ReturnType<Core['apiKeys']['roll']>>;
    let classified: Organisation;
    try {
      await one.core.apiKeys.revoke(OPERATOR, org.id, keyId);
      rolled = await one.core.apiKeys.roll(OPERATOR, org.id, rollable.key.id, { grace_period_seconds: 0 });
      classified = await one.core.organisations.classify(OPERATOR, org.id, 'K');
    } finally {
      shared.endChange = end;
    }
    expect(ends, 'each change tried to end (and retried)').to.be.greaterThan(0);
    expect(rolled.rawKey, 'the committed roll hands over its new key').to.be.a('string');
    expect(classified.industrySection).to.equal('K');
    expect(one.logger.entries.some((e) => e.level === 'warn' && /end could not be announced/.test(e.message)), 'a warning is logged').to.equal(true);
    // No instance answers from the state before the changes: not while the markers live, nor after.
    for (const [when, advance] of [['markers live', 0], ['markers expired', IN_MEMORY_CHANGE_BOUND_MS + 1]] as const) {
      clock.advance(advance);
      for (const i of [one, two]) {
        expect(await admit(i), `${when}: the revoked key`).to.equal(401);
        expect(await admit(i, `Bearer ${rollable.rawKey}`), `${when}: the rolled (grace 0) key`).to.equal(401);
        const answer = await i.core.admission.admit(`Bearer ${rolled.rawKey}`, TEST_SOURCE);
        expect(answer.admitted, `${when}: the rolled key's successor`).to.equal(true);
        if (answer.admitted) expect(answer.organisation.industrySection, `${when}: the classified organisation`).to.equal('K');
      }
    }
    // The repeat of a committed roll is refused (already rolled), so the answer above was the only chance to get the key.
    await rejectsWith(one.core.apiKeys.roll(OPERATOR, org.id, rollable.key.id, {}), ConflictError);
  });

  it('a failure before the commit (the change cannot begin) still answers 503 and writes nothing', async () => {
    const rollable = await one.core.apiKeys.issue(OPERATOR, org.id, { label: 'to roll' });
    shared.failing = true;
    try {
      await rejectsWith(one.core.apiKeys.roll(OPERATOR, org.id, rollable.key.id, { grace_period_seconds: 0 }), UnavailableError);
      await rejectsWith(one.core.organisations.classify(OPERATOR, org.id, 'K'), UnavailableError);
    } finally {
      shared.failing = false;
    }
    expect((await one.core.apiKeys.get(OPERATOR, org.id, rollable.key.id)).revokedAt).to.equal(null);
    expect((await one.core.organisations.get(OPERATOR, org.id)).industrySection).to.not.equal('K');
    expect((await one.core.apiKeys.list(OPERATOR, org.id, {})).items.length, 'no new key').to.equal(2);
  });

  it('C-57, the lease: while it is not held nothing is trusted or filled; a lease lost and taken anew empties the cache even with no request in between, so a change written unfenced meanwhile is never served', async () => {
    const lease = { current: 1 as number | null, epoch() { return this.current; } };
    const leased = instance({ lease });
    await warm(leased);
    // Lost: every request reads the store, and nothing it reads is kept.
    lease.current = null;
    let reads = leased.keys.reads;
    for (let n = 0; n < 3; n++) expect(await admit(leased)).to.equal('ok');
    expect(leased.keys.reads - reads, 'a store read per request while the lease is not held').to.equal(3);
    // Taken again, lost, and (without a request seeing that) taken anew while a writer that saw no
    // registered instance changed the key without fencing.
    lease.current = 2;
    await warm(leased);
    lease.current = null;
    await storePorts(store).apiKeys.revoke(org.id, keyId, clock.now()); // no beginChange / endChange
    lease.current = 3;
    expect(await admit(leased), 'the entry from before the lapse is gone').to.equal(401);
    // A fill whose store read started under one epoch is not kept once the epoch changed.
    const other = await one.core.apiKeys.issue(OPERATOR, org.id, { label: 'other' });
    lease.current = 4;
    leased.keys.hold();
    const reading = admit(leased, `Bearer ${other.rawKey}`); // a miss: reads the store under epoch 4
    lease.current = 5;
    leased.keys.release();
    expect(await reading).to.equal('ok');
    reads = leased.keys.reads;
    expect(await admit(leased, `Bearer ${other.rawKey}`)).to.equal('ok');
    expect(leased.keys.reads - reads, 'not filled from the read that straddled the new epoch').to.equal(1);
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

  it("CREDENTIAL_CACHE=off (fenceMode: 'best-effort'): every request reads the store and is counted once by the rate limiter; writes fence best effort", async () => {
    const off = instance({ cache: false });
    const reads = off.keys.reads;
    const before = await orgCount(); // itself a hit: +1
    const { decision } = await admitted(off.core, auth());
    expect(decision.remaining).to.equal(LIMIT - before - 1);
    await admitted(off.core, auth());
    expect(off.keys.reads - reads).to.equal(2);
    expect(await orgCount()).to.equal(before + 3);
    await warm(two);
    await off.core.organisations.patch(OPERATOR, org.id, { name: 'Via the off instance' });
    const { principal } = await admitted(two.core, auth());
    expect((await two.core.organisations.get(principal, org.id)).name).to.equal('Via the off instance');
    shared.failing = true;
    await off.core.organisations.patch(OPERATOR, org.id, { name: 'Redis down' }); // no 503 with the cache off
  });

  it('C-57, key roll: the old key\'s shortened expiry reaches the other instance\'s cache at once (shortenExpiry is fenced), and a roll with no grace revokes it there', async () => {
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

  describe('the fence: every credential-changing operation declares its organisation, announced before its transaction opens', () => {
    /** begin/end of the shared counter store and the opening/closing of transactions, in order. */
    let events: string[];
    let fenced: Instance;
    /** Runs before each transaction of `fenced` opens (after its fence has begun), when set. */
    let beforeOpen: (() => Promise<void>) | undefined;

    beforeEach(() => {
      events = [];
      beforeOpen = undefined;
      const begin = shared.beginChange.bind(shared);
      const finish = shared.endChange.bind(shared);
      shared.beginChange = (o, c) => (events.push(`begin ${o.token}`), begin(o, c));
      shared.endChange = (o, c) => (events.push(`end ${o.token}`), finish(o, c));
      const keys = new GatedApiKeyStore(storePorts(store).apiKeys);
      const logger = new CapturingLogger();
      const opening = async <T>(open: () => Promise<T>): Promise<T> => {
        await beforeOpen?.();
        events.push('transaction opens');
        try {
          return await open();
        } finally {
          events.push('transaction ends');
        }
      };
      const unitOfWork: UnitOfWork = {
        run: (work) => opening(() => store.unitOfWork.run(work)),
        changeCredentials: (organisationIds, work) => opening(() => store.unitOfWork.changeCredentials(organisationIds, work)),
      };
      const core = createCore({ stores: store.stores, unitOfWork, health: store.health, counter: shared, freshness: shared, clock, logger, config: { rateLimitPerMinute: LIMIT } });
      fenced = { core, keys, logger };
    });

    const announced = () => [`begin ${freshnessKeys(org.id).token}`, 'transaction opens', 'transaction ends', `end ${freshnessKeys(org.id).token}`];
    const fence = (name: string, change: () => Promise<unknown>, after: () => Promise<void>) =>
      it(`C-36, C-57: ${name}: begun before its transaction opens and ended after it, and the other instance's cache serves the change at once`, async () => {
        await warm(two);
        events = [];
        await change();
        expect(events).to.deep.equal(announced());
        await after();
      });
    const refused = async (): Promise<void> => {
      expect(await admit(two)).to.equal(401);
    };
    const renamed = (name: string) => async () => {
      const { principal, organisation } = await admitted(two.core, auth());
      expect(organisation.name).to.equal(name);
      expect((await two.core.organisations.get(principal, org.id, { authenticatedOrganisation: organisation })).name).to.equal(name);
    };

    fence('revoke (DELETE of a key, cos-admin key revoke)', () => fenced.core.apiKeys.revoke(OPERATOR, org.id, keyId), refused);
    fence('roll with no grace (revokes the old key)', () => fenced.core.apiKeys.roll(OPERATOR, org.id, keyId, { grace_period_seconds: 0 }), refused);
    fence('roll with a grace (shortens the old key\'s expiry)', () => fenced.core.apiKeys.roll(OPERATOR, org.id, keyId, { grace_period_seconds: 60 }), async () => {
      expect(await admit(two)).to.equal('ok');
      clock.advance(60_001);
      expect(await admit(two)).to.equal(401);
    });
    fence('organisation PUT', () => fenced.core.organisations.replace(OPERATOR, org.id, { name: 'Replaced' }), renamed('Replaced'));
    fence('organisation PATCH', () => fenced.core.organisations.patch(OPERATOR, org.id, { name: 'Patched' }), renamed('Patched'));
    fence('cos-admin org classify', () => fenced.core.organisations.classify(OPERATOR, org.id, 'F'), async () => {
      const { organisation } = await admitted(two.core, auth());
      expect(organisation.industrySection).to.equal('F');
    });
    fence('exposure (secret-scanning revocation)', async () => {
      const report = await fenced.core.secretScanning.report([{ token: raw, type: 'cos_api_key', url: 'https://example.com/leak' }]);
      expect(report.outcomes.revoked).to.equal(1);
    }, refused);

    it('a report of a key that is already revoked changes no credential: no fence, so it does not depend on the counter store', async () => {
      await fenced.core.apiKeys.revoke(OPERATOR, org.id, keyId);
      events = [];
      shared.failing = true;
      const report = await fenced.core.secretScanning.report([{ token: raw, type: 'cos_api_key', url: 'https://example.com/again' }]);
      expect(report.outcomes.recorded).to.equal(1);
      expect(events).to.deep.equal(['transaction opens', 'transaction ends']);
    });

    describe('an exposure whose lineage crosses organisations (C-100, C-101)', () => {
      let system: Organisation;
      /** A platform key (system organisation), KB it issued in `org`, and KB2 that KB issued. */
      let p2: { raw: string; id: string };
      let kb: { raw: string; id: string };
      let kb2: { raw: string; id: string };
      const token = (o: string) => freshnessKeys(o).token;
      const alert = (raw: string) => fenced.core.secretScanning.report([{ token: raw, type: 'cos_api_key', url: 'https://example.com/leak' }]);
      const issueAs = async (issuer: string, orgId: string, label: string) => {
        const { principal } = await admitted(one.core, `Bearer ${issuer}`);
        const issued = await one.core.apiKeys.issue(principal, orgId, { label });
        return { raw: issued.rawKey, id: issued.key.id };
      };

      beforeEach(async () => {
        system = await one.core.organisations.create(OPERATOR, { name: 'Platform', slug: 'platform' }, { isSystem: true });
        const platform = await one.core.apiKeys.issue(OPERATOR, system.id, { label: 'p2' });
        p2 = { raw: platform.rawKey, id: platform.key.id };
        kb = await issueAs(p2.raw, org.id, 'kb');
        kb2 = await issueAs(kb.raw, org.id, 'kb2');
        const { principal } = await admitted(one.core, `Bearer ${p2.raw}`);
        await one.core.keyPolicies.replace(principal, system.id, { max_lifetime_seconds: null, allowed_environments: ['live', 'test'], exposure_response: 'revoke_key_and_descendants' });
        // The system organisation's slot is new to the counter store: not settled for its change bound.
        expect(await admit(two, `Bearer ${p2.raw}`)).to.equal('ok');
        clock.advance(IN_MEMORY_CHANGE_BOUND_MS + 1);
        for (const r of [kb.raw, kb2.raw, p2.raw, raw]) await warm(two, `Bearer ${r}`);
        events = [];
      });

      it("C-100, C-101, C-36, C-57: one unit of work, fenced for the platform key's organisation and the descendants' before it opens and ended after; the other instance's cache refuses KB and KB2 at once", async () => {
        const report = await alert(p2.raw);
        expect(report.outcomes.revoked).to.equal(1);
        expect(events).to.deep.equal([`begin ${token(system.id)}`, `begin ${token(org.id)}`, 'transaction opens', 'transaction ends', `end ${token(system.id)}`, `end ${token(org.id)}`]);
        for (const k of [p2, kb, kb2]) expect(await admit(two, `Bearer ${k.raw}`), k === p2 ? 'P2' : k === kb ? 'KB' : 'KB2').to.equal(401);
        expect(await admit(two), "the organisation's unrelated key").to.equal('ok');
      });

      it('C-101: a key issued into another organisation between the lineage read and the unit of work: nothing is written, and the unit of work runs again with that organisation fenced too', async () => {
        const orgC = await one.core.organisations.create(OPERATOR, { name: 'Third', slug: 'third' });
        let late: { raw: string; id: string } | undefined;
        beforeOpen = async () => {
          if (late !== undefined) return;
          late = await issueAs(p2.raw, orgC.id, 'late');
          events.push('issued into C');
        };
        const report = await alert(p2.raw);
        expect(report.outcomes.revoked).to.equal(1);
        const [s, b, c] = [token(system.id), token(org.id), token(orgC.id)];
        expect(events).to.deep.equal([
          `begin ${s}`, `begin ${b}`, 'issued into C', 'transaction opens', 'transaction ends', `end ${s}`, `end ${b}`,
          `begin ${s}`, `begin ${b}`, `begin ${c}`, 'transaction opens', 'transaction ends', `end ${s}`, `end ${b}`, `end ${c}`,
        ]);
        for (const k of [p2, kb, kb2, late!]) expect(await admit(two, `Bearer ${k.raw}`)).to.equal(401);
        const exposed = await store.stores.audit.list({ kind: 'api_key_exposed' }, { after: null, limit: 100 });
        expect(exposed.map((e) => e.descendantKeyIds)).to.deep.equal([[kb.id, kb2.id, late!.id].sort()]);
        const revokedInC = await store.stores.audit.list({ organisationId: orgC.id, kind: 'api_key_revoked' }, { after: null, limit: 100 });
        expect(revokedInC.map((e) => [e.keyId, e.actor.type])).to.deep.equal([[late!.id, 'secret_scanning']]);
      });

      it(`C-101: keys issued into yet another organisation before each of ${EXPOSURE_ATTEMPTS} units of work: 503 with nothing written for the key, which stays valid`, async () => {
        let n = 0;
        beforeOpen = async () => {
          const next = await one.core.organisations.create(OPERATOR, { name: `Moving ${n}`, slug: `moving-${n++}` });
          await issueAs(p2.raw, next.id, 'moving');
        };
        const auditBefore = await store.stores.audit.list({}, { after: null, limit: 1000 });
        const error = await rejectsWith(alert(p2.raw), UnavailableError);
        expect(error.message).to.equal(EXPOSURE_LINEAGE_CHANGING_MESSAGE);
        expect(events.filter((e) => e === 'transaction opens')).to.have.length(EXPOSURE_ATTEMPTS);
        beforeOpen = undefined;
        const auditAfter = await store.stores.audit.list({}, { after: null, limit: 1000 });
        expect(auditAfter.filter((e) => !['organisation_created', 'api_key_issued'].includes(e.kind))).to.deep.equal(
          auditBefore.filter((e) => !['organisation_created', 'api_key_issued'].includes(e.kind)),
        );
        for (const k of [p2, kb, kb2]) expect(await admit(two, `Bearer ${k.raw}`)).to.equal('ok');
      });
    });

    it('the counter store unreachable: the change is refused with 503 before its transaction opens', async () => {
      events = [];
      shared.failing = true;
      await rejectsWith(fenced.core.apiKeys.revoke(OPERATOR, org.id, keyId), UnavailableError);
      expect(events).to.deep.equal([`begin ${freshnessKeys(org.id).token}`]);
      shared.failing = false;
      expect((await store.stores.apiKeys.findById(org.id, keyId))?.revokedAt).to.equal(null);
    });

    it('a write the use case did not declare fails loudly (UndeclaredCredentialChangeError) and changes nothing', async () => {
      const error = await store.unitOfWork.run((tx) => (tx as Stores).apiKeys.revoke(org.id, keyId, clock.now())).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(UndeclaredCredentialChangeError);
      expect((await store.stores.apiKeys.findById(org.id, keyId))?.revokedAt).to.equal(null);
    });
  });

  it('C-57, C-62: a key policy change is a fenced credential change of its organisation: begun before the write, ended after, refused (503, nothing written) when the shared store is unreachable', async () => {
    await warm(two);
    const begun: string[] = [];
    const begin = shared.beginChange.bind(shared);
    shared.beginChange = (keys, c) => {
      begun.push(keys.token);
      return begin(keys, c);
    };
    const policy = { max_lifetime_seconds: 3_600, allowed_environments: ['live'], exposure_response: 'revoke_key' };
    await one.core.keyPolicies.replace(OPERATOR, org.id, policy);
    expect(begun).to.deep.equal([freshnessKeys(org.id).token]);
    expect(await admit(two), 'the change ended: the organisation is settled again, the key still valid').to.equal('ok');
    shared.beginChange = () => Promise.reject(new Error('redis down'));
    const refused = await one.core.keyPolicies.replace(OPERATOR, org.id, { ...policy, max_lifetime_seconds: 7_200 }).then(
      () => null,
      (e: Error) => e,
    );
    expect(refused?.message).to.equal(FENCE_UNAVAILABLE_MESSAGE);
    expect((await one.core.keyPolicies.get(OPERATOR, org.id)).maxLifetimeSeconds).to.equal(3_600);
  });

  it('C-242: a plan change at one instance applies on the next request at the other, whose cache is warm: a raised limit lets an organisation over its old limit in, a lowered one refuses; the change is fenced and refused (503, nothing written) when the shared store is unreachable', async () => {
    await warm(two);
    const limitAt = async (i: Instance) => (await admitted(i.core, auth())).decision;
    expect((await limitAt(two)).limit).to.equal(LIMIT);
    const begun: string[] = [];
    const begin = shared.beginChange.bind(shared);
    shared.beginChange = (keys, c) => {
      begun.push(keys.token);
      return begin(keys, c);
    };
    await one.core.rateLimits.replace(OPERATOR, org.id, { requests_per_minute: 4 });
    expect(begun).to.deep.equal([freshnessKeys(org.id).token]);
    let answers: string[] = [];
    for (let n = 0; n < 3; n++) answers.push(String(await admit(two)));
    expect(answers, 'already past 4 in this minute').to.deep.equal(['429', '429', '429']);
    const refused = await two.core.admission.admit(auth(), TEST_SOURCE);
    expect(refused.admitted && refused.decision).to.deep.include({ allowed: false, limit: 4 });
    await one.core.rateLimits.replace(OPERATOR, org.id, { requests_per_minute: 1_000 });
    const raised = await limitAt(two);
    expect(raised).to.deep.include({ allowed: true, limit: 1_000 });
    const reads = two.keys.reads;
    answers = [];
    for (let n = 0; n < 3; n++) answers.push(String(await admit(two)));
    expect(answers).to.deep.equal(['ok', 'ok', 'ok']);
    expect(two.keys.reads - reads, 'served from the cache again').to.be.at.most(1);
    shared.beginChange = () => Promise.reject(new Error('redis down'));
    const failed = await one.core.rateLimits.replace(OPERATOR, org.id, { requests_per_minute: 5 }).then(
      () => null,
      (e: Error) => e,
    );
    expect(failed?.message).to.equal(FENCE_UNAVAILABLE_MESSAGE);
    expect(await one.core.rateLimits.get(OPERATOR, org.id)).to.deep.equal({ requestsPerMinute: 1_000, source: 'organisation' });
  });

  it('C-54: a refused credential change says its reason, and its warning is logged at most once per 10 s of the Clock port', async () => {
    const interval = 10_000;
    shared.beginChange = () => Promise.reject(new Error('redis down'));
    const refusals: unknown[] = [];
    const refuse = async () => refusals.push(await one.core.apiKeys.revoke(OPERATOR, org.id, keyId).then(() => null, (e: unknown) => e));
    const warnings = () => one.logger.entries.filter((e) => e.level === 'warn' && /credential changes refused/.test(e.message)).length;
    await refuse();
    await refuse();
    expect(warnings(), 'the second refusal within the interval is not logged again').to.equal(1);
    clock.advance(interval - 1);
    await refuse();
    expect(warnings()).to.equal(1);
    clock.advance(1);
    await refuse();
    expect(warnings(), 'a full interval later on the fake clock').to.equal(2);
    for (const e of refusals) {
      expect(isDomainErrorWithCode(e, 'SERVICE_UNAVAILABLE') && e.reason).to.equal('credential_fence');
    }
    expect((await store.stores.apiKeys.findById(org.id, keyId))?.revokedAt).to.equal(null);
  });
});
