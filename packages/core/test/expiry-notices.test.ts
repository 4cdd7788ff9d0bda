/**
 * ExpiryNotices (C-280..C-282) over the in-memory store with a FakeClock: a key gets one
 * `api_key.expiring` event in the outbox once it has its organisation's notice period or less
 * left, never twice, never when the period is 0 or the key is revoked; a key of an organisation
 * without an endpoint is claimed without an event; a failing scan is logged and never thrown.
 */
import { expect } from 'chai';
import { ExpiryNotices, OPERATOR, cryptoRandom, type Notification } from '@cos/core';
import { CapturingLogger, createTestCore, type TestCore } from '@cos/core/testing';

const DAY = 86_400_000;
const HOOK = 'https://hooks.example.com/cos';

async function expiringEvents(tc: TestCore): Promise<Notification[]> {
  const all = await tc.store.stores.outbox.list({}, { after: null, limit: 100 });
  return all.filter((n) => n.type === 'api_key.expiring');
}

function scanner(tc: TestCore, logger = tc.logger): ExpiryNotices {
  return new ExpiryNotices({ stores: tc.store.stores, unitOfWork: tc.store.unitOfWork, clock: tc.clock, random: cryptoRandom, logger });
}

describe('core: ExpiryNotices', () => {
  it('C-280, C-281: one api_key.expiring event once the key has 7 days or less left (the default), none before and none again', async () => {
    const tc = createTestCore();
    const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    await tc.core.webhooks.set(OPERATOR, org.id, HOOK);
    const expiresAt = new Date(tc.clock.now().getTime() + 10 * DAY);
    const issued = await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'billing', expires_at: expiresAt.toISOString() });
    await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'forever' });
    const notices = scanner(tc);

    expect(await notices.scanOnce(), '10 days left').to.deep.equal({ claimed: 0, enqueued: 0 });
    tc.clock.advance(3 * DAY - 1);
    expect(await notices.scanOnce(), 'a millisecond more than 7 days left').to.deep.equal({ claimed: 0, enqueued: 0 });
    tc.clock.advance(1);
    expect(await notices.scanOnce(), 'exactly 7 days left').to.deep.equal({ claimed: 1, enqueued: 1 });
    const [event] = await expiringEvents(tc);
    expect(event?.organisationId).to.equal(org.id);
    expect(JSON.parse(event!.payload)).to.deep.equal({
      type: 'api_key.expiring',
      timestamp: tc.clock.now().toISOString(),
      data: { organisation_id: org.id, key_id: issued.key.id, key_prefix: issued.key.keyPrefix, label: 'billing', expires_at: expiresAt.toISOString() },
    });
    expect(event!.payload).not.to.include(issued.rawKey);
    expect(event!.payload).not.to.include(issued.key.digest);
    tc.clock.advance(DAY);
    expect(await notices.scanOnce(), 'once per key').to.deep.equal({ claimed: 0, enqueued: 0 });
    expect(await expiringEvents(tc)).to.have.length(1);
    expect(tc.logger.entries.filter((e) => e.message.startsWith('expiry notices')).map((e) => e.fields)).to.deep.equal([{ claimed: 1, enqueued: 1 }]);
  });

  it('C-280: the organisation\'s own period applies; 0 sends none; a revoked key gets none', async () => {
    const tc = createTestCore();
    const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    await tc.core.webhooks.set(OPERATOR, org.id, HOOK);
    const policy = { max_lifetime_seconds: null, allowed_environments: ['live', 'test'], exposure_response: 'revoke_key' };
    await tc.core.keyPolicies.replace(OPERATOR, org.id, { ...policy, expiry_notice_seconds: 30 * 86_400 });
    const in20 = await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'in 20 days', expires_at: new Date(tc.clock.now().getTime() + 20 * DAY).toISOString() });
    const revoked = await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'revoked', expires_at: new Date(tc.clock.now().getTime() + 2 * DAY).toISOString() });
    await tc.core.apiKeys.revoke(OPERATOR, org.id, revoked.key.id);
    const notices = scanner(tc);
    expect(await notices.scanOnce()).to.deep.equal({ claimed: 1, enqueued: 1 });
    expect((await expiringEvents(tc)).map((n) => (JSON.parse(n.payload) as { data: { key_id: string } }).data.key_id)).to.deep.equal([in20.key.id]);

    const quiet = await tc.core.organisations.create(OPERATOR, { name: 'Quiet', slug: 'quiet' });
    await tc.core.webhooks.set(OPERATOR, quiet.id, HOOK);
    await tc.core.keyPolicies.replace(OPERATOR, quiet.id, { ...policy, expiry_notice_seconds: 0 });
    await tc.core.apiKeys.issue(OPERATOR, quiet.id, { label: 'soon', expires_at: new Date(tc.clock.now().getTime() + 60_000).toISOString() });
    expect(await notices.scanOnce(), 'notices off').to.deep.equal({ claimed: 0, enqueued: 0 });
  });

  it('C-282: a key of an organisation without an endpoint (or not subscribed) is claimed without an event; an endpoint added later sends none for it', async () => {
    const tc = createTestCore();
    const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'soon', expires_at: new Date(tc.clock.now().getTime() + DAY).toISOString() });
    const other = await tc.core.organisations.create(OPERATOR, { name: 'Other', slug: 'other' });
    await tc.core.webhooks.put(OPERATOR, other.id, { url: HOOK, events: ['api_key.revoked'] });
    await tc.core.apiKeys.issue(OPERATOR, other.id, { label: 'soon', expires_at: new Date(tc.clock.now().getTime() + DAY).toISOString() });
    const notices = scanner(tc);
    expect(await notices.scanOnce()).to.deep.equal({ claimed: 2, enqueued: 0 });
    await tc.core.webhooks.set(OPERATOR, org.id, HOOK);
    expect(await notices.scanOnce()).to.deep.equal({ claimed: 0, enqueued: 0 });
    expect(await expiringEvents(tc)).to.deep.equal([]);
  });

  it('C-282: started, it scans at once and then every interval; a failing scan is logged at warn and never thrown', async () => {
    const tc = createTestCore();
    const logger = new CapturingLogger();
    let calls = 0;
    const failing = {
      apiKeys: {
        ...tc.store.stores.apiKeys,
        listExpiryNoticesDue: () => {
          calls += 1;
          return Promise.reject(new Error('database unavailable'));
        },
      },
    };
    const notices = new ExpiryNotices({ stores: failing, unitOfWork: tc.store.unitOfWork, clock: tc.clock, random: cryptoRandom, logger, intervalMs: 20 });
    expect(new ExpiryNotices({ stores: tc.store.stores, unitOfWork: tc.store.unitOfWork, clock: tc.clock, random: cryptoRandom, logger }).intervalMs, 'once a minute').to.equal(60_000);
    notices.start();
    for (let i = 0; i < 200 && calls < 2; i += 1) await new Promise((r) => setTimeout(r, 10));
    await notices.stop();
    expect(calls).to.be.at.least(2);
    expect(logger.entries[0]).to.deep.include({ level: 'warn', message: 'expiry notices scan failed; trying again at the next interval' });
    expect(logger.entries[0]?.fields['err']).to.equal('database unavailable');
  });
});
