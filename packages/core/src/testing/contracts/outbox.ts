/**
 * Contract suite of Outbox (C-59): exact records, leased claims (several senders never start the
 * same attempt), completion under the claim only, operator retry, lists (paging C-6, C-7).
 */
import { expect } from 'chai';
import type { Notification } from '../../domain/webhook.js';
import type { StoreHarnessFactory } from '../harness.js';
import { ascendingIds, at, expectConflictError, expectSameInstant, eachWithTwoOrganisations, newOrganisation, newOutboxNotification } from './fixtures.js';
import { describeKeysetPaging } from './paging.js';

export function expectNotification(actual: Notification | undefined | null, expected: Notification): void {
  expect(actual, `notification ${expected.id}`).to.not.equal(undefined);
  expect(actual, `notification ${expected.id}`).to.not.equal(null);
  const n = actual as Notification;
  expect(n.id).to.equal(expected.id);
  expect(n.organisationId).to.equal(expected.organisationId);
  expect(n.type).to.equal(expected.type);
  expect(n.payload).to.equal(expected.payload);
  expect(n.status, 'status').to.equal(expected.status);
  expect(n.attempts, 'attempts').to.equal(expected.attempts);
  expectSameInstant(n.nextAttemptAt, expected.nextAttemptAt, 'nextAttemptAt');
  expectSameInstant(n.createdAt, expected.createdAt, 'createdAt');
  if (expected.completedAt === null) expect(n.completedAt, 'completedAt').to.equal(null);
  else expectSameInstant(n.completedAt, expected.completedAt, 'completedAt');
  expect(n.lastError, 'lastError').to.equal(expected.lastError);
  expect(Object.keys(n).sort()).to.deep.equal(
    ['attempts', 'completedAt', 'createdAt', 'id', 'lastError', 'nextAttemptAt', 'organisationId', 'payload', 'status', 'type'],
    'no other fields (the claim never leaves the store)',
  );
}

const ALL = { limit: 100, after: null } as const;
const ids = (ns: readonly Notification[]): string[] => ns.map((n) => n.id);

export function describeOutbox(name: string, factory: StoreHarnessFactory): void {
  describe(`Outbox contract: ${name}`, () => {
    const current = eachWithTwoOrganisations(factory);
    const outbox = () => current().harness.stores.outbox;
    const orgA = (): string => current().orgA.id;
    const orgB = (): string => current().orgB.id;
    /** A further organisation (the per-organisation claim rule needs more than two). */
    async function anotherOrganisation(): Promise<string> {
      const org = newOrganisation();
      await current().harness.stores.organisations.create(org);
      return org.id;
    }
    /** Enqueues each, in the given order. */
    async function enqueueAll(...ns: Notification[]): Promise<void> {
      for (const n of ns) await outbox().enqueue(n);
    }

    describe('enqueue and findById', () => {
      it('C-59: round-trips a pending notification exactly (payload text, ms timestamps, nulls)', async () => {
        const n = newOutboxNotification(orgA(), {
          type: 'api_key.exposed',
          payload: '{"type":"api_key.exposed","timestamp":"2026-03-01T09:15:42.123Z","data":{"url":"https://ex.ample/ł?x=1&y=\\"2\\""}}',
          nextAttemptAt: at(5),
          createdAt: at(4),
        });
        await outbox().enqueue(n);
        expectNotification(await outbox().findById(n.id), n);
      });

      it('C-59: round-trips a completed record (delivered with completedAt, failed with lastError)', async () => {
        const delivered = newOutboxNotification(orgA(), { status: 'delivered', attempts: 2, completedAt: at(9), lastError: 'HTTP 500' });
        const failed = newOutboxNotification(orgB(), { status: 'failed', attempts: 8, completedAt: at(10), lastError: 'timeout after 15000 ms' });
        await enqueueAll(delivered, failed);
        expectNotification(await outbox().findById(delivered.id), delivered);
        expectNotification(await outbox().findById(failed.id), failed);
      });

      it('an unknown id is null', async () => {
        await outbox().enqueue(newOutboxNotification(orgA()));
        expect(await outbox().findById('msg_00000000000000000000000000000000')).to.equal(null);
      });

      it('a duplicate id throws ConflictError and keeps the first record', async () => {
        const first = newOutboxNotification(orgA());
        await outbox().enqueue(first);
        await expectConflictError(outbox().enqueue(newOutboxNotification(orgB(), { id: first.id, payload: '{}' })));
        expectNotification(await outbox().findById(first.id), first);
        expect(await outbox().countPending()).to.equal(1);
      });

      it('returns copies: mutating a returned record or the input changes nothing stored', async () => {
        const input = newOutboxNotification(orgA(), { nextAttemptAt: at(3) });
        const original = { ...input, nextAttemptAt: new Date(input.nextAttemptAt), createdAt: new Date(input.createdAt) };
        await outbox().enqueue(input);
        input.nextAttemptAt.setTime(0);
        (input as { status: string }).status = 'delivered';
        const found = await outbox().findById(original.id);
        expectNotification(found, original);
        found!.createdAt.setTime(0);
        expectNotification(await outbox().findById(original.id), original);
      });
    });

    describe('claimDue', () => {
      it('C-59: claims only pending notifications that are due and not under a live lease', async () => {
        const due = newOutboxNotification(orgA(), { nextAttemptAt: at(0) });
        const dueExactlyNow = newOutboxNotification(orgB(), { nextAttemptAt: at(100) });
        const notYet = newOutboxNotification(orgA(), { nextAttemptAt: at(101) });
        const delivered = newOutboxNotification(orgA(), { status: 'delivered', completedAt: at(1), nextAttemptAt: at(0) });
        const failed = newOutboxNotification(orgA(), { status: 'failed', completedAt: at(1), lastError: 'gone', nextAttemptAt: at(0) });
        const leased = newOutboxNotification(await anotherOrganisation(), { nextAttemptAt: at(-50) });
        await enqueueAll(leased);
        expect(ids(await outbox().claimDue(at(-50), at(1_000), 10, 'claim-other'))).to.deep.equal([leased.id]);
        await enqueueAll(due, dueExactlyNow, notYet, delivered, failed);
        const claimed = await outbox().claimDue(at(100), at(30_100), 10, 'claim-1');
        expect(ids(claimed).sort()).to.deep.equal([due.id, dueExactlyNow.id].sort());
        expectNotification(await outbox().findById(notYet.id), notYet);
        expectNotification(await outbox().findById(delivered.id), delivered);
        expectNotification(await outbox().findById(failed.id), failed);
      });

      it('C-59: returns them oldest due first (nextAttemptAt, then id), at most `limit`, each with attempts + 1', async () => {
        const [i0, i1, i2, i3] = ascendingIds(4) as [string, string, string, string];
        const [o3, o4] = [await anotherOrganisation(), await anotherOrganisation()];
        const a = newOutboxNotification(orgA(), { id: i3, nextAttemptAt: at(-30), createdAt: at(5), attempts: 2 });
        const b = newOutboxNotification(orgB(), { id: i1, nextAttemptAt: at(-20) });
        const c = newOutboxNotification(o3, { id: i0, nextAttemptAt: at(-20), createdAt: at(-40) });
        const d = newOutboxNotification(o4, { id: i2, nextAttemptAt: at(-10) });
        await enqueueAll(d, b, a, c);
        const first = await outbox().claimDue(at(0), at(60_000), 3, 'claim-1');
        expect(ids(first)).to.deep.equal([a.id, c.id, b.id]);
        expectNotification(first[0], { ...a, attempts: 3 });
        expectNotification(first[1], { ...c, attempts: 1 });
        expectNotification(first[2], { ...b, attempts: 1 });
        expectNotification(await outbox().findById(a.id), { ...a, attempts: 3 });
        const rest = await outbox().claimDue(at(0), at(60_000), 3, 'claim-2');
        expect(ids(rest)).to.deep.equal([d.id]);
        expect(await outbox().claimDue(at(0), at(60_000), 3, 'claim-3')).to.deep.equal([]);
      });

      it('C-59: a second claim before the lease ends gets nothing; once it ends another claim takes it, counting one more attempt', async () => {
        const n = newOutboxNotification(orgA());
        await outbox().enqueue(n);
        expect(ids(await outbox().claimDue(at(0), at(30_000), 10, 'claim-1'))).to.deep.equal([n.id]);
        expect(await outbox().claimDue(at(0), at(30_000), 10, 'claim-2')).to.deep.equal([]);
        expect(await outbox().claimDue(at(29_999), at(59_999), 10, 'claim-2'), '1 ms before the lease ends').to.deep.equal([]);
        const again = await outbox().claimDue(at(30_000), at(60_000), 10, 'claim-2');
        expect(ids(again), 'at the lease end exactly').to.deep.equal([n.id]);
        expectNotification(again[0], { ...n, attempts: 2 });
        expect(await outbox().complete(n.id, 'claim-1', { status: 'delivered', at: at(30_001) }), 'the expired claim').to.equal(false);
        expect(await outbox().complete(n.id, 'claim-2', { status: 'delivered', at: at(30_002) })).to.equal(true);
        expectNotification(await outbox().findById(n.id), { ...n, attempts: 2, status: 'delivered', completedAt: at(30_002) });
      });

      it('a limit of zero claims nothing; an empty outbox gives an empty array', async () => {
        expect(await outbox().claimDue(at(0), at(1), 10, 'claim-1')).to.deep.equal([]);
        const n = newOutboxNotification(orgA());
        await outbox().enqueue(n);
        expect(await outbox().claimDue(at(0), at(1), 0, 'claim-1')).to.deep.equal([]);
        expectNotification(await outbox().findById(n.id), n);
      });

      it('C-59: concurrent claims never hand out the same notification (no attempt is started twice), nor two of one organisation', async () => {
        const orgs = [orgA(), orgB()];
        for (let i = 0; i < 10; i++) orgs.push(await anotherOrganisation());
        const all = Array.from({ length: 24 }, (_, i) => newOutboxNotification(orgs[i % orgs.length]!, { nextAttemptAt: at(-i) }));
        await enqueueAll(...all);
        const claimedIds: string[] = [];
        for (let wave = 0; wave < 4 && claimedIds.length < all.length; wave++) {
          const claims = await Promise.all(Array.from({ length: 6 }, (_, i) => outbox().claimDue(at(0), at(60_000), 5, `claim-${wave}-${i}`)));
          for (const c of claims) expect(c.length).to.be.at.most(5);
          const claimed = claims.flat();
          const orgsClaimed = claimed.map((n) => n.organisationId);
          expect(new Set(orgsClaimed).size, 'one notification per organisation at a time').to.equal(orgsClaimed.length);
          expect(claimed.length, `wave ${wave}: every organisation with a due notification gets one`).to.equal(
            new Set(all.filter((n) => !claimedIds.includes(n.id)).map((n) => n.organisationId)).size,
          );
          claimedIds.push(...ids(claimed));
          for (const [i, c] of claims.entries()) for (const n of c) expect(await outbox().complete(n.id, `claim-${wave}-${i}`, { status: 'delivered', at: at(1) })).to.equal(true);
        }
        expect(new Set(claimedIds).size, 'no notification claimed twice').to.equal(claimedIds.length);
        expect(claimedIds.slice().sort(), 'every due notification claimed exactly once').to.deep.equal(ids(all).sort());
        for (const n of all) expect((await outbox().findById(n.id))!.attempts, `attempts of ${n.id}`).to.equal(1);
      });
    });

    describe('claimDue per organisation (one endpoint, one attempt at a time, in write order)', () => {
      it('C-59: of one organisation only the notification written first is claimed, also when written in one unit of work with one createdAt and ids in the opposite order', async () => {
        const [low, high] = ascendingIds(2) as [string, string];
        const exposed = newOutboxNotification(orgA(), { id: high, type: 'api_key.exposed' });
        const revoked = newOutboxNotification(orgA(), { id: low, type: 'api_key.revoked' });
        const other = newOutboxNotification(orgB());
        await current().harness.unitOfWork.run(async (stores) => {
          await stores.outbox.enqueue(exposed);
          await stores.outbox.enqueue(revoked);
        });
        await outbox().enqueue(other);
        const first = await outbox().claimDue(at(0), at(30_000), 10, 'claim-1');
        expect(ids(first).sort()).to.deep.equal([exposed.id, other.id].sort());
        expect(await outbox().claimDue(at(0), at(30_000), 10, 'claim-2'), 'orgA holds a live claim').to.deep.equal([]);
        expect(await outbox().complete(exposed.id, 'claim-1', { status: 'delivered', at: at(5) })).to.equal(true);
        const second = await outbox().claimDue(at(5), at(30_005), 10, 'claim-3');
        expect(ids(second)).to.deep.equal([revoked.id]);
        expectNotification(second[0], { ...revoked, attempts: 1 });
      });

      it('C-59: write order is enqueue order across calls too, whatever the ids and createdAt', async () => {
        const sorted = ascendingIds(5);
        // Enqueued with descending ids and one createdAt: the claim follows the enqueue order.
        const ns = sorted.reverse().map((id) => newOutboxNotification(orgA(), { id }));
        await enqueueAll(...ns);
        const order: string[] = [];
        for (let i = 0; i < ns.length; i++) {
          const [n, ...more] = await outbox().claimDue(at(i), at(i + 30_000), 10, `claim-${i}`);
          expect(more).to.deep.equal([]);
          order.push(n!.id);
          expect(await outbox().complete(n!.id, `claim-${i}`, { status: 'failed', at: at(i), error: 'HTTP 410' })).to.equal(true);
        }
        expect(order).to.deep.equal(ids(ns));
      });

      it('C-59: a notification backing off does not hold back the later ones; once due again it goes before them', async () => {
        const [first, second, third] = [newOutboxNotification(orgA()), newOutboxNotification(orgA()), newOutboxNotification(orgA())];
        await enqueueAll(first, second, third);
        expect(ids(await outbox().claimDue(at(0), at(30_000), 10, 'claim-1'))).to.deep.equal([first.id]);
        expect(await outbox().complete(first.id, 'claim-1', { status: 'pending', nextAttemptAt: at(5_000), error: 'HTTP 503' })).to.equal(true);
        expect(ids(await outbox().claimDue(at(10), at(30_010), 10, 'claim-2')), 'the next one while the first backs off').to.deep.equal([second.id]);
        expect(await outbox().complete(second.id, 'claim-2', { status: 'delivered', at: at(20) })).to.equal(true);
        expect(ids(await outbox().claimDue(at(5_000), at(35_000), 10, 'claim-3')), 'due again: written before the third').to.deep.equal([first.id]);
        expect(await outbox().complete(first.id, 'claim-3', { status: 'delivered', at: at(5_001) })).to.equal(true);
        expect(ids(await outbox().claimDue(at(5_001), at(35_001), 10, 'claim-4'))).to.deep.equal([third.id]);
      });

      it('C-59: an organisation whose claim is live gets nothing more until it completes, is released or its lease ends', async () => {
        const [n1, n2] = [newOutboxNotification(orgA()), newOutboxNotification(orgA())];
        await enqueueAll(n1, n2);
        expect(ids(await outbox().claimDue(at(0), at(30_000), 10, 'claim-1'))).to.deep.equal([n1.id]);
        expect(await outbox().claimDue(at(29_999), at(59_999), 10, 'claim-2'), '1 ms before the lease ends').to.deep.equal([]);
        // The lease ended (a sender that died): the first one is claimed again, not the second.
        expect(ids(await outbox().claimDue(at(30_000), at(60_000), 10, 'claim-3'))).to.deep.equal([n1.id]);
        expect(await outbox().release(n1.id, 'claim-3')).to.equal(true);
        // Released: due at once, and still the one written first.
        const again = await outbox().claimDue(at(30_001), at(60_001), 10, 'claim-4');
        expect(ids(again)).to.deep.equal([n1.id]);
        expectNotification(again[0], { ...n1, attempts: 3 });
      });
    });

    describe('complete', () => {
      async function claimed(overrides: Partial<Notification> = {}): Promise<Notification> {
        const n = newOutboxNotification(orgA(), overrides);
        await outbox().enqueue(n);
        const [c] = await outbox().claimDue(at(0), at(30_000), 1, 'claim-1');
        expect(c?.id).to.equal(n.id);
        return c!;
      }

      it('C-59: delivered: status delivered, completedAt set, never claimed again, not pending', async () => {
        const n = await claimed();
        expect(await outbox().complete(n.id, 'claim-1', { status: 'delivered', at: at(250) })).to.equal(true);
        expectNotification(await outbox().findById(n.id), { ...n, status: 'delivered', completedAt: at(250) });
        expect(await outbox().claimDue(at(1_000_000), at(2_000_000), 10, 'claim-2')).to.deep.equal([]);
        expect(await outbox().countPending()).to.equal(0);
      });

      it('C-59: pending (retry with backoff): rescheduled with the error, lease released, claimable at nextAttemptAt and not before', async () => {
        const n = await claimed();
        expect(await outbox().complete(n.id, 'claim-1', { status: 'pending', nextAttemptAt: at(5_000), error: 'HTTP 503' })).to.equal(true);
        const rescheduled = { ...n, nextAttemptAt: at(5_000), lastError: 'HTTP 503' };
        expectNotification(await outbox().findById(n.id), rescheduled);
        expect(await outbox().claimDue(at(4_999), at(34_999), 10, 'claim-2')).to.deep.equal([]);
        const again = await outbox().claimDue(at(5_000), at(35_000), 10, 'claim-2');
        expectNotification(again[0], { ...rescheduled, attempts: 2 });
        expect(await outbox().complete(n.id, 'claim-1', { status: 'delivered', at: at(5_001) }), 'the earlier claim').to.equal(false);
      });

      it('C-59: pending before the old lease would have ended: released at once, so it is due again at its new time', async () => {
        const n = await claimed();
        expect(await outbox().complete(n.id, 'claim-1', { status: 'pending', nextAttemptAt: at(10), error: 'connection reset' })).to.equal(true);
        expect(ids(await outbox().claimDue(at(10), at(30_010), 10, 'claim-2'))).to.deep.equal([n.id]);
      });

      it('C-59: failed: status failed with completedAt and the error, never claimed again', async () => {
        const n = await claimed({ attempts: 7 });
        expect(await outbox().complete(n.id, 'claim-1', { status: 'failed', at: at(300), error: 'HTTP 410' })).to.equal(true);
        expectNotification(await outbox().findById(n.id), { ...n, status: 'failed', completedAt: at(300), lastError: 'HTTP 410' });
        expect(await outbox().claimDue(at(1_000_000), at(2_000_000), 10, 'claim-2')).to.deep.equal([]);
        expect(await outbox().countPending()).to.equal(0);
      });

      it('C-59: false and no change with another claim, with no claim held, for an unknown id, or a second time', async () => {
        const unclaimed = newOutboxNotification(orgB(), { nextAttemptAt: at(1_000_000) });
        await outbox().enqueue(unclaimed);
        const n = await claimed();
        expect(await outbox().complete(n.id, 'claim-x', { status: 'delivered', at: at(1) })).to.equal(false);
        expectNotification(await outbox().findById(n.id), n);
        expect(await outbox().complete(unclaimed.id, 'claim-1', { status: 'failed', at: at(1), error: 'x' })).to.equal(false);
        expectNotification(await outbox().findById(unclaimed.id), unclaimed);
        expect(await outbox().complete('msg_unknown', 'claim-1', { status: 'delivered', at: at(1) })).to.equal(false);
        expect(await outbox().complete(n.id, 'claim-1', { status: 'delivered', at: at(2) })).to.equal(true);
        expect(await outbox().complete(n.id, 'claim-1', { status: 'failed', at: at(3), error: 'late' }), 'a second time').to.equal(false);
        expectNotification(await outbox().findById(n.id), { ...n, status: 'delivered', completedAt: at(2) });
      });
    });

    describe('release', () => {
      it('C-59: ends the lease at once: due again at its unchanged nextAttemptAt, the attempt stays counted, lastError kept', async () => {
        const n = newOutboxNotification(orgA(), { nextAttemptAt: at(-5), attempts: 2, lastError: 'HTTP 500' });
        await outbox().enqueue(n);
        expect(ids(await outbox().claimDue(at(0), at(30_000), 10, 'claim-1'))).to.deep.equal([n.id]);
        expect(await outbox().release(n.id, 'claim-1')).to.equal(true);
        expectNotification(await outbox().findById(n.id), { ...n, attempts: 3 });
        expect(await outbox().complete(n.id, 'claim-1', { status: 'delivered', at: at(1) }), 'the released claim').to.equal(false);
        const again = await outbox().claimDue(at(1), at(30_001), 10, 'claim-2');
        expect(ids(again)).to.deep.equal([n.id]);
        expect(await outbox().complete(n.id, 'claim-2', { status: 'delivered', at: at(2) })).to.equal(true);
      });

      it('C-59: false and no change with another claim, an unknown id, or after completion', async () => {
        const n = newOutboxNotification(orgA());
        await outbox().enqueue(n);
        const [claimed] = await outbox().claimDue(at(0), at(30_000), 10, 'claim-1');
        expect(await outbox().release(n.id, 'claim-x')).to.equal(false);
        expect(await outbox().claimDue(at(1), at(30_001), 10, 'claim-2'), 'still held').to.deep.equal([]);
        expect(await outbox().release('msg_unknown', 'claim-1')).to.equal(false);
        expect(await outbox().complete(n.id, 'claim-1', { status: 'delivered', at: at(2) })).to.equal(true);
        expect(await outbox().release(n.id, 'claim-1')).to.equal(false);
        expectNotification(await outbox().findById(n.id), { ...claimed!, status: 'delivered', completedAt: at(2) });
      });
    });

    describe('retry', () => {
      it('C-59: a failed notification becomes pending, due now, with a fresh attempt count (the last error kept)', async () => {
        const failed = newOutboxNotification(orgA(), { status: 'failed', attempts: 8, completedAt: at(50), lastError: 'HTTP 500', nextAttemptAt: at(40) });
        await outbox().enqueue(failed);
        expect(await outbox().retry(failed.id, at(1_000))).to.equal(true);
        const retried = { ...failed, status: 'pending' as const, attempts: 0, nextAttemptAt: at(1_000), completedAt: null };
        expectNotification(await outbox().findById(failed.id), retried);
        expect(await outbox().countPending()).to.equal(1);
        expect(await outbox().claimDue(at(999), at(2_000), 10, 'claim-1')).to.deep.equal([]);
        expectNotification((await outbox().claimDue(at(1_000), at(2_000), 10, 'claim-1'))[0], { ...retried, attempts: 1 });
      });

      it('C-59: a claimed pending notification is made due at once and its claim dropped', async () => {
        const n = newOutboxNotification(orgA());
        await outbox().enqueue(n);
        await outbox().claimDue(at(0), at(60_000), 1, 'claim-1');
        expect(await outbox().retry(n.id, at(10))).to.equal(true);
        expect(await outbox().complete(n.id, 'claim-1', { status: 'delivered', at: at(11) }), 'the dropped claim').to.equal(false);
        expect(ids(await outbox().claimDue(at(10), at(60_010), 1, 'claim-2'))).to.deep.equal([n.id]);
      });

      it('C-59: false for a delivered notification (unchanged) and for an unknown id', async () => {
        const delivered = newOutboxNotification(orgA(), { status: 'delivered', attempts: 1, completedAt: at(5) });
        await outbox().enqueue(delivered);
        expect(await outbox().retry(delivered.id, at(10))).to.equal(false);
        expectNotification(await outbox().findById(delivered.id), delivered);
        expect(await outbox().retry('msg_unknown', at(10))).to.equal(false);
      });
    });

    describe('purgeCompleted', () => {
      it('C-59: deletes delivered and failed notifications completed before the cut-off, never pending ones, and says how many', async () => {
        const oldDelivered = newOutboxNotification(orgA(), { status: 'delivered', attempts: 1, completedAt: at(10) });
        const oldFailed = newOutboxNotification(orgB(), { status: 'failed', attempts: 10, completedAt: at(20), lastError: 'answered 500' });
        const atCutOff = newOutboxNotification(orgA(), { status: 'delivered', attempts: 1, completedAt: at(100) });
        const recent = newOutboxNotification(orgA(), { status: 'failed', attempts: 3, completedAt: at(500), lastError: 'x' });
        const oldPending = newOutboxNotification(orgA(), { createdAt: at(-1_000_000), nextAttemptAt: at(-1_000_000) });
        const retriedPending = newOutboxNotification(orgB(), { attempts: 0, lastError: 'answered 500', createdAt: at(1), nextAttemptAt: at(5) });
        await enqueueAll(oldDelivered, oldFailed, atCutOff, recent, oldPending, retriedPending);
        const claimed = await outbox().claimDue(at(0), at(1_000_000), 1, 'claim-1');
        expect(ids(claimed), 'a pending one under a claim').to.deep.equal([oldPending.id]);

        expect(await outbox().purgeCompleted(at(100), 100)).to.equal(2);
        expect(await outbox().findById(oldDelivered.id)).to.equal(null);
        expect(await outbox().findById(oldFailed.id)).to.equal(null);
        expectNotification(await outbox().findById(atCutOff.id), atCutOff);
        expectNotification(await outbox().findById(recent.id), recent);
        expectNotification(await outbox().findById(oldPending.id), { ...oldPending, attempts: 1 });
        expectNotification(await outbox().findById(retriedPending.id), retriedPending);
        expect(await outbox().countPending()).to.equal(2);
        expect(await outbox().purgeCompleted(at(100), 100), 'nothing left before the cut-off').to.equal(0);
        expect(await outbox().purgeCompleted(at(1_000_000_000), 100), 'every completed one goes; pending ones, even very old, stay').to.equal(2);
        expect(ids(await outbox().list({}, ALL)).sort()).to.deep.equal([oldPending.id, retriedPending.id].sort());
      });

      it('C-59: deletes at most limit rows per call, oldest completed first', async () => {
        const done = [5, 1, 4, 2, 3].map((t) => newOutboxNotification(orgA(), { status: 'delivered', attempts: 1, completedAt: at(t) }));
        await enqueueAll(...done);
        expect(await outbox().purgeCompleted(at(1_000), 2)).to.equal(2);
        const left = (await outbox().list({}, ALL)).map((n) => n.completedAt!.getTime() - at(0).getTime()).sort();
        expect(left).to.deep.equal([3, 4, 5]);
        expect(await outbox().purgeCompleted(at(1_000), 0), 'a limit of zero deletes nothing').to.equal(0);
        expect(await outbox().purgeCompleted(at(1_000), 10)).to.equal(3);
        expect(await outbox().list({}, ALL)).to.deep.equal([]);
      });

      it('C-59: a notification retried after it failed is pending again and is not purged', async () => {
        const failed = newOutboxNotification(orgA(), { status: 'failed', attempts: 10, completedAt: at(1), lastError: 'answered 500' });
        await outbox().enqueue(failed);
        expect(await outbox().retry(failed.id, at(2))).to.equal(true);
        expect(await outbox().purgeCompleted(at(1_000), 10)).to.equal(0);
        expect((await outbox().findById(failed.id))?.status).to.equal('pending');
      });
    });

    describe('list and countPending', () => {
      it('C-59: lists full records by organisation, by status and by both, oldest first', async () => {
        const a1 = newOutboxNotification(orgA(), { createdAt: at(1) });
        const b1 = newOutboxNotification(orgB(), { createdAt: at(2), status: 'failed', completedAt: at(3), lastError: 'HTTP 404' });
        const a2 = newOutboxNotification(orgA(), { createdAt: at(3), status: 'delivered', attempts: 1, completedAt: at(4) });
        const b2 = newOutboxNotification(orgB(), { createdAt: at(4) });
        await enqueueAll(b2, a2, b1, a1);
        const all = await outbox().list({}, ALL);
        expect(ids(all)).to.deep.equal(ids([a1, b1, a2, b2]));
        [a1, b1, a2, b2].forEach((n, i) => expectNotification(all[i], n));
        expect(ids(await outbox().list({ organisationId: orgA() }, ALL))).to.deep.equal(ids([a1, a2]));
        expect(ids(await outbox().list({ status: 'pending' }, ALL))).to.deep.equal(ids([a1, b2]));
        expect(ids(await outbox().list({ status: 'failed' }, ALL))).to.deep.equal(ids([b1]));
        expect(ids(await outbox().list({ organisationId: orgB(), status: 'pending' }, ALL))).to.deep.equal(ids([b2]));
        expect(await outbox().list({ organisationId: orgA(), status: 'failed' }, ALL)).to.deep.equal([]);
        expect(await outbox().list({ organisationId: '3f2504e0-4f89-41d3-9a0c-0305e82c3301' }, ALL)).to.deep.equal([]);
      });

      it('C-6: a status-filtered list pages by (createdAt, id) and skips nothing', async () => {
        const ns = ascendingIds(7).map((id, i) =>
          newOutboxNotification(i % 2 === 0 ? orgA() : orgB(), {
            id,
            createdAt: at(i < 3 ? 0 : i),
            ...(i % 3 === 0 ? { status: 'delivered' as const, completedAt: at(9) } : {}),
          }),
        );
        await enqueueAll(...[...ns].reverse());
        const seen: string[] = [];
        let after: { createdAt: Date; id: string } | null = null;
        for (let pages = 0; pages <= ns.length; pages++) {
          const page: Notification[] = await outbox().list({ status: 'pending' }, { limit: 2, after });
          seen.push(...ids(page));
          if (page.length < 2) break;
          after = { createdAt: page[1]!.createdAt, id: page[1]!.id };
        }
        expect(seen).to.deep.equal(ids(ns.filter((n) => n.status === 'pending')));
      });

      it('C-59: countPending counts pending notifications only, claimed or not', async () => {
        expect(await outbox().countPending()).to.equal(0);
        await enqueueAll(
          newOutboxNotification(orgA()),
          newOutboxNotification(orgB(), { nextAttemptAt: at(1_000_000) }),
          newOutboxNotification(orgA(), { status: 'delivered', completedAt: at(1) }),
          newOutboxNotification(orgA(), { status: 'failed', completedAt: at(1), lastError: 'x' }),
        );
        expect(await outbox().countPending()).to.equal(2);
        await outbox().claimDue(at(0), at(1_000), 10, 'claim-1');
        expect(await outbox().countPending()).to.equal(2);
      });
    });
  });

  describeKeysetPaging(`Outbox contract: ${name}`, factory, async (harness) => {
    const org = newOrganisation();
    const other = newOrganisation();
    await harness.stores.organisations.create(org);
    await harness.stores.organisations.create(other);
    await harness.stores.outbox.enqueue(newOutboxNotification(other.id, { createdAt: at(1) }));
    return {
      insert: (createdAt, id) => harness.stores.outbox.enqueue(newOutboxNotification(org.id, { id, createdAt })),
      list: (page) => harness.stores.outbox.list({ organisationId: org.id }, page),
    };
  });
}
