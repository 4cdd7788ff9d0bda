import { expect } from 'chai';
import {
  Admission,
  ALL_BUILTIN_SCOPES,
  Authenticator,
  DEFAULT_CORE_CONFIG,
  OPERATOR,
  RateLimiter,
  counterKey,
  silentLogger,
  windowAt,
  UNAUTHORIZED_MESSAGE,
  UnauthorizedError,
  UnavailableError,
  digestKey,
  parseAuthorization,
  type ApiKeyStore,
  type CoreConfig,
  type Credential,
  type RateCounter,
} from '@cos/core';
import { FakeClock, InMemoryRateCounter } from '@cos/core/testing';
import { CountingApiKeyStore, TEST_SOURCE, fixture, rejectsWith, withStore } from './use-cases-fixtures.js';
import { storePorts } from '@cos/core/testing/contracts';

describe('use case: admission and authenticate', () => {
  async function setup() {
    const f = fixture();
    const { org, issued } = await f.tenant('acme');
    const counting = new CountingApiKeyStore(storePorts(f.store).apiKeys);
    const auth = new Authenticator({ stores: withStore(storePorts(f.store), 'apiKeys', counting), clock: f.clock });
    return { f, org, issued, raw: issued.rawKey, counting, auth };
  }

  it('C-32: a well-formed Bearer header authenticates; the principal carries key, prefix and organisation', async () => {
    const { auth, raw, issued, org, counting } = await setup();
    const principal = await auth.authenticate(`Bearer ${raw}`);
    expect(principal).to.deep.equal({
      kind: 'api_key',
      keyId: issued.key.id,
      keyPrefix: raw.slice(0, 12),
      organisationId: org.id,
      isPlatform: false,
      scopes: ALL_BUILTIN_SCOPES,
      allowedCidrs: null,
    });
    expect(counting.calls).to.equal(1);
  });

  /** An Admission over the counting store and a counter that records every hit's key. */
  async function admissionSetup(config: Partial<CoreConfig> = {}) {
    const base = await setup();
    const hits: string[] = [];
    const counter = new InMemoryRateCounter(base.f.clock);
    const recording: RateCounter = {
      hit: (key, ttlMs) => {
        hits.push(key);
        return counter.hit(key, ttlMs);
      },
    };
    const limiter = new RateLimiter({ counter: recording, clock: base.f.clock, logger: silentLogger, config: { ...DEFAULT_CORE_CONFIG, ...config } });
    const admission = new Admission({ stores: withStore(storePorts(base.f.store), 'apiKeys', base.counting), clock: base.f.clock }, { limiter });
    return { ...base, hits, admission };
  }

  it('C-32, C-36, C-50: admit() answers the principal, the organisation read with the key (one store query) and its organisation\'s decision, counted exactly once', async () => {
    const { admission, auth, raw, issued, org, counting, hits, f } = await admissionSetup();
    const answer = await admission.admit(`Bearer ${raw}`, TEST_SOURCE);
    if (!answer.admitted) throw new Error('not admitted');
    expect(answer.principal).to.deep.equal(await auth.authenticate(`Bearer ${raw}`));
    expect(answer.principal.keyId).to.equal(issued.key.id);
    expect(answer.organisation).to.deep.equal(org);
    expect(answer.decision.allowed).to.equal(true);
    expect(answer.decision.remaining).to.equal(DEFAULT_CORE_CONFIG.rateLimitPerMinute - 1);
    expect(counting.calls).to.equal(2); // admit() once, authenticate() once
    expect(hits).to.deep.equal([counterKey(`org:${org.id}`, windowAt(f.clock.now().getTime()).startMs)]);
  });

  it('C-33, C-50: a key that does not authenticate is counted against its source address only, with the 401 to answer; over the source limit the decision refuses (429)', async () => {
    const { admission, f, org, issued, hits, counting } = await admissionSetup({ rateLimitPerMinute: 3 });
    await f.core.apiKeys.revoke(OPERATOR, org.id, issued.key.id);
    const headers = [undefined, 'Bearer nope', `Bearer svc_live_${'Z'.repeat(48)}`, `Bearer ${issued.rawKey}`];
    const answers = [];
    for (const header of headers) answers.push(await admission.admit(header, TEST_SOURCE));
    expect(answers.map((a) => a.admitted)).to.deep.equal([false, false, false, false]);
    expect(answers.map((a) => a.decision.allowed)).to.deep.equal([true, true, true, false]);
    for (const a of answers) if (!a.admitted) expect(a.refusal).to.be.instanceOf(UnauthorizedError);
    expect(hits).to.deep.equal(headers.map(() => counterKey(`src:${TEST_SOURCE}`, windowAt(f.clock.now().getTime()).startMs)));
    expect(counting.calls, 'malformed headers read nothing').to.equal(2);
  });

  it('C-33, C-51: an organisation over its limit is admitted with a refusing decision (429), and once known over it costs no further counter hit', async () => {
    const { admission, raw, org, hits, f } = await admissionSetup({ rateLimitPerMinute: 2 });
    const allowed = [];
    for (let n = 0; n < 4; n++) {
      const answer = await admission.admit(`Bearer ${raw}`, TEST_SOURCE);
      expect(answer.admitted).to.equal(true);
      allowed.push(answer.decision.allowed);
    }
    expect(allowed).to.deep.equal([true, true, false, false]);
    expect(hits).to.deep.equal([1, 2, 3].map(() => counterKey(`org:${org.id}`, windowAt(f.clock.now().getTime()).startMs)));
  });

  it('C-32: the scheme is case-insensitive', async () => {
    const { auth, raw } = await setup();
    for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
      expect((await auth.authenticate(`${scheme} ${raw}`)).kind).to.equal('api_key');
    }
  });

  it('C-32: anything but exactly "Bearer <key>" is 401 without touching the store', async () => {
    const { auth, raw, counting } = await setup();
    const malformed: Array<string | undefined> = [
      undefined,
      '',
      'Bearer',
      'Bearer ',
      raw,
      `Bearer  ${raw}`,
      ` Bearer ${raw}`,
      `Bearer ${raw} `,
      `Bearer ${raw}\n`,
      `Bearer\t${raw}`,
      `Basic ${raw}`,
      `Token ${raw}`,
      `Bearer ${raw.slice(0, -1)}`,
      `Bearer ${raw}A`,
      `Bearer ${raw.replace('svc_live_', 'svc_prod_')}`,
      `Bearer ${raw.replace('svc_live_', 'SVC_LIVE_')}`,
      `Bearer ${raw.slice(0, -1)}!`,
      `Bearer ${raw.slice(0, -1)}é`,
      `Bearer svc_live_${'a'.repeat(47)}`,
      `Bearer ${'x'.repeat(1_000_000)}`,
      `Bearer ${raw},Bearer ${raw}`,
    ];
    for (const header of malformed) {
      const e = await rejectsWith(auth.authenticate(header), UnauthorizedError);
      expect(e.message).to.equal(UNAUTHORIZED_MESSAGE);
    }
    expect(counting.calls).to.equal(0);
  });

  it('C-32: parseAuthorization returns the raw key only for the exact form', () => {
    const raw = `svc_test_${'Ab1'.repeat(16)}`;
    expect(parseAuthorization(`Bearer ${raw}`)).to.equal(raw);
    expect(parseAuthorization(`Bearer ${raw} `)).to.equal(null);
    expect(parseAuthorization(42)).to.equal(null);
  });

  it('spec §5.2: an unknown well-formed key is 401 after one lookup by digest', async () => {
    const { auth, counting } = await setup();
    await rejectsWith(auth.authenticate(`Bearer svc_live_${'Z'.repeat(48)}`), UnauthorizedError);
    expect(counting.calls).to.equal(1);
  });

  it('C-31: a credential whose digest does not match is rejected (constant-time comparison, not trust in the store)', async () => {
    const { f, issued } = await setup();
    const real = storePorts(f.store).apiKeys;
    const lying: ApiKeyStore = {
      ...real,
      findCredential: async (): Promise<Credential | null> => real.findCredential(issued.key.digest),
    };
    const auth = new Authenticator({ stores: withStore(storePorts(f.store), 'apiKeys', lying), clock: f.clock });
    await rejectsWith(auth.authenticate(`Bearer svc_live_${'Q'.repeat(48)}`), UnauthorizedError);
    expect((await auth.authenticate(`Bearer ${issued.rawKey}`)).keyId).to.equal(issued.key.id);
    expect(digestKey(issued.rawKey)).to.equal(issued.key.digest);
  });

  it('C-36: a revoked key is 401 on the very next request', async () => {
    const { f, auth, raw, org, issued } = await setup();
    await auth.authenticate(`Bearer ${raw}`);
    await f.core.apiKeys.revoke(OPERATOR, org.id, issued.key.id);
    await rejectsWith(auth.authenticate(`Bearer ${raw}`), UnauthorizedError);
  });

  it('C-36: a key is accepted until its expires_at and rejected from that instant on', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const issued = await f.key(org.id, { label: 'temp', expires_at: '2026-06-10T13:00:00Z' });
    const auth = f.core.authenticator;
    f.clock.set('2026-06-10T12:59:59.999Z');
    expect((await auth.authenticate(`Bearer ${issued.rawKey}`)).keyId).to.equal(issued.key.id);
    f.clock.set('2026-06-10T13:00:00.000Z');
    await rejectsWith(auth.authenticate(`Bearer ${issued.rawKey}`), UnauthorizedError);
  });

  it('spec §5.5: a key of a system organisation is a platform principal', async () => {
    const f = fixture();
    const { principal } = await f.platform();
    expect(principal.isPlatform).to.equal(true);
  });

  it('C-17: a store failure propagates as UnavailableError, not as 401', async () => {
    const f = fixture();
    const down = new UnavailableError();
    const failing: ApiKeyStore = { ...storePorts(f.store).apiKeys, findCredential: () => Promise.reject(down) };
    const auth = new Authenticator({ stores: withStore(storePorts(f.store), 'apiKeys', failing), clock: new FakeClock() });
    expect(await rejectsWith(auth.authenticate(`Bearer svc_live_${'a'.repeat(48)}`), UnavailableError)).to.equal(down);
  });
});
