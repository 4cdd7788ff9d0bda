/**
 * Embedding guide: how a service embeds the Compliance Organisation Service core without HTTP.
 *
 * 1. Give createCore its ports. Here they are the in-memory adapters of @cos/core/testing; in
 *    production the SQL store (@cos/store-sql) and the Redis counter (@cos/limiter-redis) plug into
 *    the same places. Clock, Random and Logger are optional (system clock, node:crypto, silent).
 * 2. The operator (OPERATOR) sets things up; API callers are principals returned by the
 *    authenticator from their `Authorization` header.
 * 3. For every request: authenticate -> rate limit -> call the use case (C-33). Use cases throw
 *    DomainErrors whose `code` an adapter maps to a status.
 */
import { expect } from 'chai';
import {
  OPERATOR,
  RateLimitedError,
  UnauthorizedError,
  auditEntryView,
  createCore,
  issuedKeyView,
  type Core,
  type KeyPrincipal,
} from '@cos/core';
import { CapturingLogger, FakeClock, InMemoryRateCounter, createInMemoryStore } from '@cos/core/testing';

describe('embedding guide: the core without HTTP', () => {
  it('create an organisation, issue a key, authenticate, hit the rate limit, revoke, audit (C-33, C-35, C-36, C-40, C-51)', async () => {
    // 1. Wire the core over its ports.
    const clock = new FakeClock('2026-06-10T12:00:00.000Z'); // the start of a UTC minute
    const store = createInMemoryStore();
    const core: Core = createCore({
      stores: store.stores,
      unitOfWork: store.unitOfWork,
      health: store.health,
      counter: new InMemoryRateCounter(clock),
      clock,
      logger: new CapturingLogger(),
      config: { rateLimitPerMinute: 60 },
    });
    expect((await core.health.check()).status).to.equal('ok');

    // 2. The operator creates a tenant organisation and issues it a key. The raw key is in the
    //    issuance result only: hand it to the tenant now, it is never available again.
    const acme = await core.organisations.create(OPERATOR, { name: 'Acme Ltd', slug: 'acme' });
    const issued = await core.apiKeys.issue(OPERATOR, acme.id, { label: 'acme backend' });
    const response = issuedKeyView(issued, clock.now()); // the JSON an adapter would send (C-22)
    expect(response).to.include({ organisation_id: acme.id, is_active: true, status: 'active' });
    const rawKey = response.key;

    // 3. A request arrives with `Authorization: Bearer <key>`: authenticate, then rate limit.
    const serve = async (authorization: string): Promise<KeyPrincipal> => {
      const principal = await core.authenticator.authenticate(authorization);
      await core.rateLimiter.enforce({ kind: 'organisation', organisationId: principal.organisationId });
      return principal;
    };
    const principal = await serve(`Bearer ${rawKey}`);
    expect(principal).to.include({ organisationId: acme.id, isPlatform: false });
    expect((await core.organisations.get(principal, acme.id)).name).to.equal('Acme Ltd');

    // 4. 60 requests per organisation per UTC minute: requests 2..60 pass, request 61 is refused.
    for (let i = 2; i <= 60; i++) await serve(`Bearer ${rawKey}`);
    let limited: unknown;
    await serve(`Bearer ${rawKey}`).catch((e: unknown) => (limited = e));
    expect(limited).to.be.instanceOf(RateLimitedError);
    expect((limited as RateLimitedError).decision).to.include({ limit: 60, remaining: 0, retryAfterSeconds: 60 });

    // 5. In the next minute the key works again; it revokes itself (allowed, C-35).
    clock.advance(60_000);
    const again = await serve(`Bearer ${rawKey}`);
    await core.apiKeys.revoke(again, acme.id, again.keyId);

    // 6. The very next request with the revoked key is 401 (C-36).
    let unauthorised: unknown;
    await serve(`Bearer ${rawKey}`).catch((e: unknown) => (unauthorised = e));
    expect(unauthorised).to.be.instanceOf(UnauthorizedError);
    expect((unauthorised as UnauthorizedError).message).to.equal('Missing or invalid API key');

    // 7. The revocation is in the audit log, written by the key itself (C-40).
    const audit = await core.audit.list(OPERATOR, { org: acme.id, kind: 'api_key_revoked' });
    expect(audit.items.map(auditEntryView)).to.deep.equal([
      {
        id: audit.items[0]!.id,
        kind: 'api_key_revoked',
        occurred_at: '2026-06-10T12:01:00.000Z',
        organisation_id: acme.id,
        key_id: issued.key.id,
        key_prefix: rawKey.slice(0, 12),
        actor: { type: 'api_key', key_id: issued.key.id },
        seq: audit.items[0]!.seq,
        prev_hash: audit.items[0]!.prevHash,
        hash: audit.items[0]!.hash,
      },
    ]);
    expect(audit.items[0]!.seq).to.be.above(1);
    expect(JSON.stringify(audit)).not.to.include(rawKey);
  });
});
