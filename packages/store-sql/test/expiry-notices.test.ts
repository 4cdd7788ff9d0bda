/**
 * Expiry notices on real databases (C-280..C-282): through the real core on every dialect, a key
 * within its period gets one `api_key.expiring` event, and on Postgres two instances (two stores,
 * two pools, one database) scanning at the same time send exactly one notice per key.
 */
import { expect } from 'chai';
import { ExpiryNotices, OPERATOR, cryptoRandom, type Notification } from '@cos/core';
import { CapturingLogger, createTestCore, FakeClock } from '@cos/core/testing';
import type { SqlStore } from '@cos/store-sql';
import { forEachTarget, withPostgres } from './support/targets.js';

const DAY = 86_400_000;
const HOOK = 'https://receiver.example/hook';

async function expiringEvents(store: SqlStore): Promise<Notification[]> {
  return (await store.stores.outbox.list({}, { after: null, limit: 1000 })).filter((n) => n.type === 'api_key.expiring');
}

function scannerOf(store: SqlStore, clock: FakeClock): ExpiryNotices {
  return new ExpiryNotices({ stores: store.stores, unitOfWork: store.unitOfWork, clock, random: cryptoRandom, logger: new CapturingLogger() });
}

forEachTarget('expiry notices', (target) => {
  let store: SqlStore;
  beforeEach(async () => {
    store = await target.open();
  });
  afterEach(() => store.close());

  it('C-280, C-281: the core\'s scan writes one api_key.expiring event for the key within its period, none for the others, none twice', async () => {
    const tc = createTestCore({ store });
    const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: `acme-${Date.now()}` });
    await tc.core.webhooks.set(OPERATOR, org.id, HOOK);
    const soon = await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'soon', expires_at: new Date(tc.clock.now().getTime() + 2 * DAY).toISOString() });
    await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'later', expires_at: new Date(tc.clock.now().getTime() + 9 * DAY).toISOString() });
    await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'never' });
    expect(await tc.core.expiryNotices.scanOnce()).to.deep.equal({ claimed: 1, enqueued: 1 });
    expect(await tc.core.expiryNotices.scanOnce()).to.deep.equal({ claimed: 0, enqueued: 0 });
    const events = await expiringEvents(store);
    expect(events.map((n) => (JSON.parse(n.payload) as { data: { key_id: string } }).data.key_id)).to.deep.equal([soon.key.id]);
    const listed = await tc.core.apiKeys.list(OPERATOR, org.id, { expiring_within: 'P7D' });
    expect(listed.items.map((k) => k.id), 'the list filter on this dialect').to.deep.equal([soon.key.id]);
  });
});

withPostgres('expiry notices: two instances scanning at once (Postgres)', (url, target) => {
  let a: SqlStore;
  let b: SqlStore;
  beforeEach(async () => {
    // Both on the same freshly emptied schema (each open empties it first, so both before any write).
    a = await target.open();
    b = await target.open();
  });
  afterEach(async () => {
    await a.close();
    await b.close();
  });

  it('C-282: two scanners on two pools, started together, send exactly one notice per key between them', async () => {
    expect(url).to.be.a('string');
    const clock = new FakeClock();
    const tc = createTestCore({ store: a, clock });
    const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: `acme-${Date.now()}` });
    await tc.core.webhooks.set(OPERATOR, org.id, HOOK);
    const KEYS = 40;
    const issued = [];
    for (let i = 0; i < KEYS; i += 1) {
      issued.push(await tc.core.apiKeys.issue(OPERATOR, org.id, { label: `k${i}`, expires_at: new Date(clock.now().getTime() + DAY + i * 1000).toISOString() }));
    }
    const first = scannerOf(a, clock);
    const second = scannerOf(b, clock);
    for (let round = 0; round < 3; round += 1) {
      const [x, y] = await Promise.all([first.scanOnce(), second.scanOnce()]);
      if (round === 0) expect(x.claimed + y.claimed, 'every key claimed once, by one of them').to.equal(KEYS);
      else expect([x, y]).to.deep.equal([{ claimed: 0, enqueued: 0 }, { claimed: 0, enqueued: 0 }]);
    }
    const events = await expiringEvents(b);
    expect(events).to.have.length(KEYS);
    const keyIds = events.map((n) => (JSON.parse(n.payload) as { data: { key_id: string } }).data.key_id);
    expect(new Set(keyIds).size).to.equal(KEYS);
    expect([...keyIds].sort()).to.deep.equal(issued.map((k) => k.key.id).sort());
  });
});
