import { expect } from 'chai';
import {
  ALL_BUILTIN_SCOPES,
  Authenticator,
  OPERATOR,
  UNAUTHORIZED_MESSAGE,
  UnauthorizedError,
  UnavailableError,
  digestKey,
  parseAuthorization,
  type ApiKeyStore,
  type Credential,
} from '@cos/core';
import { FakeClock } from '@cos/core/testing';
import { CountingApiKeyStore, fixture, rejectsWith, withStore } from './use-cases-fixtures.js';

describe('use case: authenticate', () => {
  async function setup() {
    const f = fixture();
    const { org, issued } = await f.tenant('acme');
    const counting = new CountingApiKeyStore(f.store.stores.apiKeys);
    const auth = new Authenticator({ stores: withStore(f.store.stores, 'apiKeys', counting), clock: f.clock });
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
    });
    expect(counting.calls).to.equal(1);
  });

  it('C-32, C-36: admit() answers the principal and the organisation read with the key, in one store query; no counting without the credential cache', async () => {
    const { auth, raw, issued, org, counting } = await setup();
    const admitted = await auth.admit(`Bearer ${raw}`);
    expect(admitted.principal).to.deep.equal(await auth.authenticate(`Bearer ${raw}`));
    expect(admitted.principal.keyId).to.equal(issued.key.id);
    expect(admitted.organisation).to.deep.equal(org);
    expect(admitted.decision).to.equal(undefined);
    expect(counting.calls).to.equal(2);
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
    const real = f.store.stores.apiKeys;
    const lying: ApiKeyStore = {
      ...real,
      findCredential: async (): Promise<Credential | null> => real.findCredential(issued.key.digest),
    };
    const auth = new Authenticator({ stores: withStore(f.store.stores, 'apiKeys', lying), clock: f.clock });
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
    const failing: ApiKeyStore = { ...f.store.stores.apiKeys, findCredential: () => Promise.reject(down) };
    const auth = new Authenticator({ stores: withStore(f.store.stores, 'apiKeys', failing), clock: new FakeClock() });
    expect(await rejectsWith(auth.authenticate(`Bearer svc_live_${'a'.repeat(48)}`), UnavailableError)).to.equal(down);
  });
});
