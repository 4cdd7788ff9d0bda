/**
 * Webhook endpoint changes and notification retries are audited with their actor, in the unit of
 * work of the change, never with a secret or the URL's path; the outbox's retention purge. On the
 * real in-memory store.
 */
import { expect } from 'chai';
import {
  createCore,
  namedOperator,
  NotFoundError,
  NotificationRetention,
  OPERATOR,
  PURGE_BATCH,
  ValidationError,
  type AuditEntry,
  type AuditLog,
  type Notification,
} from '@cos/core';
import { CapturingLogger, FakeClock, InMemoryRateCounter, createInMemoryStore } from '@cos/core/testing';
import { fixture, rejectsWith, withStore, type Fixture } from './use-cases-fixtures.js';

const ALICE = namedOperator('alice');
const HOOK_URL = 'https://hooks.acme.example:8443/services/T000/B000/XXXXSECRETPATH?token=querysecret';

async function entries(f: Pick<Fixture, 'core'>, kind?: string): Promise<readonly AuditEntry[]> {
  return (await f.core.audit.list(OPERATOR, { limit: '100', ...(kind !== undefined ? { kind } : {}) })).items;
}

describe('use case: webhook changes and notification retries are audited (C-40, C-41)', () => {
  it('C-40: set, set again, rotate-secret and remove each write their entry with the named operator and the endpoint origin only', async () => {
    const f = fixture({ config: { webhookAllowHttp: true } });
    const org = await f.org('acme');
    const set = await f.core.webhooks.set(ALICE, org.id, HOOK_URL);
    f.clock.advance(1_000);
    await f.core.webhooks.set(namedOperator('bob'), org.id, 'http://other.example/x');
    f.clock.advance(1_000);
    const rotated = await f.core.webhooks.rotateSecret(ALICE, org.id);
    f.clock.advance(1_000);
    await f.core.webhooks.remove(ALICE, org.id);

    const webhookEntries = (await entries(f)).filter((e) => e.kind.startsWith('webhook_'));
    expect(webhookEntries.map((e) => [e.kind, e.actor, e.webhook, e.organisationId, e.keyId])).to.deep.equal([
      ['webhook_endpoint_set', { type: 'operator', name: 'alice' }, { origin: 'https://hooks.acme.example:8443' }, org.id, null],
      ['webhook_endpoint_set', { type: 'operator', name: 'bob' }, { origin: 'http://other.example' }, org.id, null],
      ['webhook_secret_rotated', { type: 'operator', name: 'alice' }, { origin: 'http://other.example' }, org.id, null],
      ['webhook_endpoint_removed', { type: 'operator', name: 'alice' }, { origin: 'http://other.example' }, org.id, null],
    ]);
    const text = JSON.stringify(webhookEntries);
    for (const secret of [set.newSecret!, set.newSecret!.slice(6), rotated.newSecret!, rotated.newSecret!.slice(6), 'XXXXSECRETPATH', 'querysecret', '/services/']) {
      expect(text).not.to.include(secret);
    }
  });

  it('C-41: a change that fails writes no entry: a bad URL, an unknown organisation, removing or rotating a missing endpoint', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const before = (await entries(f)).length;
    await rejectsWith(f.core.webhooks.set(ALICE, org.id, 'ftp://x.example/h'), ValidationError);
    await rejectsWith(f.core.webhooks.set(ALICE, '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b', 'https://x.example/h'), NotFoundError);
    await rejectsWith(f.core.webhooks.remove(ALICE, org.id), NotFoundError);
    await rejectsWith(f.core.webhooks.rotateSecret(ALICE, org.id), NotFoundError);
    expect(await entries(f)).to.have.length(before);
  });

  it('C-40: the entry is written in the unit of work of the change: when it cannot be written, the endpoint is not changed', async () => {
    const store = createInMemoryStore();
    const clock = new FakeClock();
    const failingAudit: AuditLog = {
      append: () => Promise.reject(new Error('audit log unavailable')),
      list: (filter, page) => store.stores.audit.list(filter, page),
      chain: (organisationId, query) => store.stores.audit.chain(organisationId, query),
      outsideChain: (organisationId) => store.stores.audit.outsideChain(organisationId),
      heads: () => store.stores.audit.heads(),
    };
    let failAudit = false;
    const core = createCore({
      stores: store.stores,
      unitOfWork: {
        run: (work) => store.unitOfWork.run((stores) => work(failAudit ? { ...stores, audit: failingAudit } : stores)),
        changeCredentials: (organisationIds, work) =>
          store.unitOfWork.changeCredentials(organisationIds, (stores) => work(failAudit ? withStore(stores, 'audit', failingAudit) : stores)),
      },
      health: store.health,
      counter: new InMemoryRateCounter(clock),
      clock,
    });
    const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    await core.webhooks.set(ALICE, org.id, 'https://hooks.acme.example/cos');
    const endpoint = await store.stores.webhooks.get(org.id);
    await core.apiKeys.issue(OPERATOR, org.id, { label: 'k' });
    const [n] = await store.stores.outbox.claimDue(clock.now(), new Date(clock.now().getTime() + 1_000), 1, 'c');
    await store.stores.outbox.complete(n!.id, 'c', { status: 'failed', at: clock.now(), error: 'answered 500' });
    const failed = await store.stores.outbox.findById(n!.id);
    failAudit = true;
    clock.advance(1_000);
    for (const change of [
      core.webhooks.set(ALICE, org.id, 'https://elsewhere.example/cos'),
      core.webhooks.rotateSecret(ALICE, org.id),
      core.webhooks.remove(ALICE, org.id),
      core.notifications.retry(ALICE, n!.id),
    ]) {
      let error: unknown;
      await change.catch((e: unknown) => (error = e));
      expect((error as Error).message).to.equal('audit log unavailable');
    }
    expect(await store.stores.webhooks.get(org.id)).to.deep.equal(endpoint);
    expect(await store.stores.outbox.findById(n!.id)).to.deep.equal(failed);
  });

  it('C-40: notifications retry writes notification_retried with the named operator, the notification id and event type; a refused retry writes none', async () => {
    const f = fixture();
    const org = await f.org('acme');
    await f.core.webhooks.set(OPERATOR, org.id, 'https://hooks.acme.example/cos');
    await f.key(org.id);
    const outbox = f.store.stores.outbox;
    const [n] = await outbox.claimDue(f.clock.now(), new Date(f.clock.now().getTime() + 1_000), 1, 'c');
    await outbox.complete(n!.id, 'c', { status: 'failed', at: f.clock.now(), error: 'answered 500' });
    f.clock.advance(5_000);
    await f.core.notifications.retry(ALICE, n!.id);
    const [entry] = await entries(f, 'notification_retried');
    expect(entry).to.deep.include({ kind: 'notification_retried', organisationId: org.id, actor: { type: 'operator', name: 'alice' }, keyId: null });
    expect(entry!.notification).to.deep.equal({ id: n!.id, type: 'api_key.issued' });
    expect(entry!.occurredAt).to.deep.equal(f.clock.now());
    await rejectsWith(f.core.notifications.retry(ALICE, '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b'), NotFoundError);
    expect(await entries(f, 'notification_retried')).to.have.length(1);
  });
});

describe('use case: the outbox retention purge (NOTIFICATION_RETENTION)', () => {
  const DAY = 24 * 60 * 60 * 1000;

  async function completedNotifications(f: Fixture, orgId: string, count: number, status: 'delivered' | 'failed'): Promise<Notification[]> {
    // One at a time: an organisation (endpoint) has at most one notification out for delivery.
    const outbox = f.store.stores.outbox;
    const claimed: Notification[] = [];
    for (let i = 0; i < count; i += 1) {
      await f.key(orgId, { label: `k${i}` });
      const [n] = await outbox.claimDue(f.clock.now(), new Date(f.clock.now().getTime() + 1_000), 1, 'c');
      if (n === undefined) throw new Error('nothing due to claim');
      await outbox.complete(n.id, 'c', status === 'delivered' ? { status, at: f.clock.now() } : { status, at: f.clock.now(), error: 'answered 500' });
      claimed.push(n);
    }
    return claimed;
  }

  it('C-59: purge deletes delivered and failed notifications completed longer ago than asked, never pending ones, and says how many', async () => {
    const f = fixture();
    const org = await f.org('acme');
    await f.core.webhooks.set(OPERATOR, org.id, 'https://hooks.acme.example/cos');
    const old = [...(await completedNotifications(f, org.id, 3, 'delivered')), ...(await completedNotifications(f, org.id, 2, 'failed'))];
    f.clock.advance(20 * DAY);
    const recent = await completedNotifications(f, org.id, 2, 'delivered');
    await f.key(org.id, { label: 'pending' });
    f.clock.advance(11 * DAY);
    const report = await f.core.notifications.purge(OPERATOR, 30 * DAY);
    expect(report).to.deep.equal({ before: new Date(f.clock.now().getTime() - 30 * DAY), purged: 5 });
    for (const n of old) expect(await f.store.stores.outbox.findById(n.id)).to.equal(null);
    const left = (await f.core.notifications.list(OPERATOR, { limit: '100' })).items;
    expect(left.map((n) => n.status).sort()).to.deep.equal(['delivered', 'delivered', 'pending']);
    expect(left.filter((n) => n.status === 'delivered').map((n) => n.id).sort()).to.deep.equal(recent.map((n) => n.id).sort());
    f.clock.advance(365 * DAY);
    expect((await f.core.notifications.purge(OPERATOR, 1)).purged, 'everything completed; the pending one stays').to.equal(2);
    expect(await f.store.stores.outbox.countPending()).to.equal(1);
  });

  it('C-59: purge works through any number of old rows in batches of PURGE_BATCH', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const outbox = f.store.stores.outbox;
    const total = PURGE_BATCH * 2 + 7;
    for (let i = 0; i < total; i += 1) {
      await outbox.enqueue({
        id: f.uuids[0]!.slice(0, 24) + String(i).padStart(12, '0'),
        organisationId: org.id,
        type: 'api_key.issued',
        payload: '{}',
        status: 'delivered',
        attempts: 1,
        nextAttemptAt: f.clock.now(),
        createdAt: f.clock.now(),
        completedAt: f.clock.now(),
        lastError: null,
      });
    }
    f.clock.advance(2 * DAY);
    expect((await f.core.notifications.purge(OPERATOR, DAY)).purged).to.equal(total);
    expect((await f.core.notifications.list(OPERATOR, {})).items).to.deep.equal([]);
  });

  it('C-59: purge is operator-only', async () => {
    const f = fixture();
    const tenant = await f.tenant('acme');
    let error: unknown;
    await f.core.notifications.purge(tenant.principal, DAY).catch((e: unknown) => (error = e));
    expect((error as Error).name).to.equal('ForbiddenError');
  });

  it('C-59: NotificationRetention purges at start, logs what it purged, and stops cleanly', async () => {
    const f = fixture();
    const org = await f.org('acme');
    await f.core.webhooks.set(OPERATOR, org.id, 'https://hooks.acme.example/cos');
    await completedNotifications(f, org.id, 4, 'delivered');
    f.clock.advance(31 * DAY);
    const logger = new CapturingLogger();
    const retention = new NotificationRetention({ notifications: f.core.notifications, logger, retentionMs: 30 * DAY });
    expect(retention.intervalMs, 'hourly, for a retention longer than an hour').to.equal(60 * 60 * 1000);
    expect(new NotificationRetention({ notifications: f.core.notifications, logger, retentionMs: 60_000 }).intervalMs).to.equal(60_000);
    retention.start();
    for (let i = 0; i < 200 && logger.entries.length === 0; i += 1) await new Promise((r) => setTimeout(r, 10));
    await retention.stop();
    expect(logger.entries.map((l) => [l.level, l.message, l.fields['purged']])).to.deep.equal([
      ['info', 'purged delivered and failed webhook notifications past their retention', 4],
    ]);
    expect((await f.core.notifications.list(OPERATOR, {})).items).to.deep.equal([]);
  });
});
