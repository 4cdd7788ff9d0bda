/** Contract suite of UnitOfWork: all-or-nothing, serialised enough for count-then-insert (C-25, C-40). */
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { ApiKey } from '../../domain/api-key.js';
import { DEFAULT_KEY_POLICY } from '../../domain/key-policy.js';
import { ConflictError } from '../../domain/errors.js';
import { UndeclaredCredentialChangeError } from '../../access/credential-change.js';
import type { Stores } from '../../ports/unit-of-work.js';
import type { Member } from '../../domain/member.js';
import type { Organisation } from '../../domain/organisation.js';
import type { StoreHarness, StoreHarnessFactory } from '../harness.js';
import { expectApiKey } from './api-key-store.js';
import { expectAuditEntry } from './audit-log.js';
import {
  at,
  expectConflict,
  newApiKey,
  newAuditEntry,
  newMember,
  newOrganisation,
  newOutboxNotification,
  newWebhookEndpoint,
  rejectionOf,
} from './fixtures.js';
import { expectNotification } from './outbox.js';
import { expectMember } from './member-store.js';
import { expectOrganisation } from './organisation-store.js';

const ALL = { limit: 100, after: null } as const;

/** An error the stores cannot have produced, to check it is rethrown unchanged. */
class InjectedFailure extends Error {
  readonly marker = randomUUID();
  constructor(where: string) {
    super(`injected failure ${where}`);
    this.name = 'InjectedFailure';
  }
}

export function describeUnitOfWork(name: string, factory: StoreHarnessFactory): void {
  describe(`UnitOfWork contract: ${name}`, () => {
    let harness: StoreHarness;
    let org: Organisation;
    let key: ApiKey;
    let member: Member;

    beforeEach(async () => {
      harness = await factory();
      org = newOrganisation({ name: 'Before', createdAt: at(0), updatedAt: at(0) });
      await harness.stores.organisations.create(org);
      key = newApiKey(org.id, { createdAt: at(1) });
      await harness.stores.apiKeys.insert(key);
      member = newMember(org.id, { createdAt: at(2) });
      await harness.stores.members.add(member);
    });

    afterEach(async () => {
      await harness.close();
    });

    const stores = () => harness.stores;

    /** Everything in the store, for before/after comparisons. */
    async function snapshot(): Promise<unknown> {
      const organisations = await stores().organisations.list(ALL);
      const perOrg = await Promise.all(
        organisations.map(async (o) => ({
          members: await stores().members.list(o.id, ALL),
          keys: await stores().apiKeys.list(o.id, ALL),
          keyPolicy: await stores().organisations.findKeyPolicy(o.id),
        })),
      );
      return { organisations, perOrg, audit: await stores().audit.list({}, ALL) };
    }

    describe('commit', () => {
      it('C-40: every write made through the given stores is visible after run resolves, and run returns the result', async () => {
        const other = newOrganisation({ createdAt: at(10) });
        const newKey = newApiKey(org.id, { createdAt: at(11) });
        const newMemberRecord = newMember(org.id, { createdAt: at(12) });
        const entry = newAuditEntry(org.id, { kind: 'api_key_revoked', keyId: key.id, keyPrefix: key.keyPrefix, occurredAt: at(13) });
        const result = await harness.unitOfWork.changeCredentials([org.id], async (tx) => {
          await tx.organisations.create(other);
          await tx.organisations.update(org.id, { name: 'After', updatedAt: at(14) });
          await tx.members.add(newMemberRecord);
          expect(await tx.members.remove(org.id, member.id)).to.equal(true);
          await tx.apiKeys.insert(newKey);
          expect(await tx.apiKeys.revoke(org.id, key.id, at(15))).to.equal(true);
          await tx.audit.append(entry);
          return { answer: 42 };
        });
        expect(result).to.deep.equal({ answer: 42 });
        expectOrganisation(await stores().organisations.findById(other.id), other);
        expectOrganisation(await stores().organisations.findById(org.id), { ...org, name: 'After', updatedAt: at(14) });
        const members = await stores().members.list(org.id, ALL);
        expect(members).to.have.length(1);
        expectMember(members[0], newMemberRecord);
        expectApiKey(await stores().apiKeys.findById(org.id, newKey.id), newKey);
        expectApiKey(await stores().apiKeys.findById(org.id, key.id), { ...key, revokedAt: at(15) });
        const audit = await stores().audit.list({}, ALL);
        expect(audit).to.have.length(1);
        expectAuditEntry(audit[0], entry);
      });

      it('C-59: a notification enqueued with the change it reports commits with it and is then claimable', async () => {
        const notification = newOutboxNotification(org.id, { nextAttemptAt: at(20), createdAt: at(20) });
        await harness.unitOfWork.changeCredentials([org.id], async (tx) => {
          expect(await tx.apiKeys.revoke(org.id, key.id, at(20))).to.equal(true);
          await tx.outbox.enqueue(notification);
        });
        expectNotification(await stores().outbox.findById(notification.id), notification);
        expect((await stores().apiKeys.findById(org.id, key.id))!.revokedAt?.getTime()).to.equal(at(20).getTime());
        expectNotification((await stores().outbox.claimDue(at(20), at(60_000), 10, 'claim-1'))[0], { ...notification, attempts: 1 });
      });

      it('C-36, C-57: a key revoked for exposure in a unit of work is seen revoked by the very next credential lookup', async () => {
        // Read first, so that any credential cache of the store holds the active key.
        expect((await stores().apiKeys.findCredential(key.digest))!.key.revokedAt).to.equal(null);
        expect((await stores().apiKeys.findCredential(key.digest))!.key.revokedAt).to.equal(null);
        await harness.unitOfWork.changeCredentials([org.id], async (tx) => {
          await tx.apiKeys.recordExposure(key.id, null, at(40));
          await tx.apiKeys.revoke(org.id, key.id, at(40));
          await tx.audit.append(
            newAuditEntry(org.id, {
              kind: 'api_key_exposed',
              keyId: key.id,
              keyPrefix: key.keyPrefix,
              occurredAt: at(40),
              actor: { type: 'secret_scanning' },
              exposure: { type: 'cos_api_key', url: null, source: null },
            }),
          );
          await tx.outbox.enqueue(newOutboxNotification(org.id, { type: 'api_key.exposed' }));
        });
        expect((await stores().apiKeys.findCredential(key.digest))!.key.revokedAt?.getTime()).to.equal(at(40).getTime());
      });

      it('reads inside run see the writes made earlier in the same run', async () => {
        const other = newOrganisation();
        await harness.unitOfWork.changeCredentials([org.id], async (tx) => {
          await tx.organisations.create(other);
          expectOrganisation(await tx.organisations.findById(other.id), other);
          expect(await tx.apiKeys.countActive(org.id, at(100))).to.equal(1);
          const k = newApiKey(org.id);
          await tx.apiKeys.insert(k);
          expect(await tx.apiKeys.countActive(org.id, at(100))).to.equal(2);
          expect((await tx.apiKeys.findCredential(k.digest))?.organisation.id).to.equal(org.id);
          await tx.apiKeys.revoke(org.id, key.id, at(50));
          expect(await tx.apiKeys.countActive(org.id, at(100))).to.equal(1);
          expect((await tx.apiKeys.list(org.id, ALL)).map((x) => x.id).sort()).to.deep.equal([key.id, k.id].sort());
        });
      });

      it('a run that writes nothing resolves with its value and changes nothing', async () => {
        const before = await snapshot();
        expect(await harness.unitOfWork.run(async (tx) => (await tx.organisations.findById(org.id))?.name)).to.equal('Before');
        expect(await snapshot()).to.deep.equal(before);
      });
    });

    describe('rollback', () => {
      it('C-40: a failing run leaves no trace of any write, and the error is rethrown unchanged', async () => {
        const before = await snapshot();
        const failure = new InjectedFailure('after every kind of write');
        const other = newOrganisation();
        const newKey = newApiKey(org.id);
        const error = await rejectionOf(
          harness.unitOfWork.changeCredentials([org.id], async (tx) => {
            await tx.organisations.create(other);
            await tx.organisations.update(org.id, { name: 'After', industrySection: 'F', updatedAt: at(14) });
            await tx.members.add(newMember(org.id));
            await tx.members.remove(org.id, member.id);
            await tx.apiKeys.insert(newKey);
            await tx.apiKeys.revoke(org.id, key.id, at(15));
            await tx.audit.append(newAuditEntry(org.id));
            throw failure;
          }),
        );
        expect(error).to.equal(failure);
        expect((error as InjectedFailure).marker).to.equal(failure.marker);
        expect(await snapshot()).to.deep.equal(before);
        expect(await stores().organisations.findById(other.id)).to.equal(null);
        expect(await stores().apiKeys.findCredential(newKey.digest)).to.equal(null);
        expectOrganisation(await stores().organisations.findById(org.id), org);
        expectApiKey(await stores().apiKeys.findById(org.id, key.id), key);
      });

      it('C-40: a failure after the revoke and before the audit append leaves the key active and no entry', async () => {
        const failure = new InjectedFailure('between revoke and audit');
        const error = await rejectionOf(
          harness.unitOfWork.changeCredentials([org.id], async (tx) => {
            expect(await tx.apiKeys.revoke(org.id, key.id, at(20))).to.equal(true);
            throw failure;
          }),
        );
        expect(error).to.equal(failure);
        expectApiKey(await stores().apiKeys.findById(org.id, key.id), key);
        expect(await stores().apiKeys.countActive(org.id, at(20))).to.equal(1);
        expect(await stores().audit.list({}, ALL)).to.deep.equal([]);
      });

      it('C-40: a failure after the revoke and the audit append leaves neither', async () => {
        const failure = new InjectedFailure('after audit');
        const error = await rejectionOf(
          harness.unitOfWork.changeCredentials([org.id], async (tx) => {
            await tx.apiKeys.revoke(org.id, key.id, at(20));
            await tx.audit.append(
              newAuditEntry(org.id, { kind: 'api_key_revoked', keyId: key.id, keyPrefix: key.keyPrefix, occurredAt: at(20) }),
            );
            throw failure;
          }),
        );
        expect(error).to.equal(failure);
        expectApiKey(await stores().apiKeys.findById(org.id, key.id), key);
        expect(await stores().audit.list({}, ALL)).to.deep.equal([]);
        // The revocation can then happen for real, exactly once.
        expect(await harness.unitOfWork.changeCredentials([org.id], (tx) => tx.apiKeys.revoke(org.id, key.id, at(30)))).to.equal(true);
        expectApiKey(await stores().apiKeys.findById(org.id, key.id), { ...key, revokedAt: at(30) });
      });

      it('C-59, C-40: a failing run leaves none of a leaked-key change: no revocation, exposure, audit entry, outbox notification or endpoint', async () => {
        const url = 'https://gist.example.com/leak';
        const notification = newOutboxNotification(org.id, { type: 'api_key.exposed' });
        const failure = new InjectedFailure('after the outbox enqueue');
        const error = await rejectionOf(
          harness.unitOfWork.changeCredentials([org.id], async (tx) => {
            expect(await tx.apiKeys.recordExposure(key.id, url, at(20))).to.equal(true);
            expect(await tx.apiKeys.revoke(org.id, key.id, at(20))).to.equal(true);
            await tx.audit.append(
              newAuditEntry(org.id, {
                kind: 'api_key_exposed',
                keyId: key.id,
                keyPrefix: key.keyPrefix,
                occurredAt: at(20),
                actor: { type: 'secret_scanning' },
                exposure: { type: 'cos_api_key', url, source: 'content' },
              }),
            );
            await tx.outbox.enqueue(notification);
            await tx.webhooks.put(newWebhookEndpoint(org.id));
            expectNotification(await tx.outbox.findById(notification.id), notification);
            throw failure;
          }),
        );
        expect(error).to.equal(failure);
        expectApiKey(await stores().apiKeys.findById(org.id, key.id), key);
        expect(await stores().audit.list({}, ALL)).to.deep.equal([]);
        expect(await stores().outbox.findById(notification.id)).to.equal(null);
        expect(await stores().outbox.countPending()).to.equal(0);
        expect(await stores().outbox.list({}, ALL)).to.deep.equal([]);
        expect(await stores().webhooks.get(org.id)).to.equal(null);
        expect(await stores().apiKeys.recordExposure(key.id, url, at(30)), 'the exposure was not kept either').to.equal(true);
      });

      it('C-13: a ConflictError raised by a store inside run rolls back the earlier writes and reaches the caller', async () => {
        const before = await snapshot();
        const earlier = newOrganisation();
        const error = await expectConflict(
          harness.unitOfWork.run(async (tx) => {
            await tx.organisations.create(earlier);
            await tx.audit.append(newAuditEntry(earlier.id, { kind: 'organisation_created' }));
            await tx.organisations.create(newOrganisation({ slug: org.slug }));
          }),
          'slug',
          'already taken',
        );
        expect(error).to.be.instanceOf(ConflictError);
        expect(await snapshot()).to.deep.equal(before);
        expect(await stores().organisations.findById(earlier.id)).to.equal(null);
      });

      it('C-25: a domain ConflictError thrown by the work itself rolls back and is rethrown unchanged', async () => {
        const before = await snapshot();
        const conflict = new ConflictError('Organisation already has the maximum number of active API keys');
        const error = await rejectionOf(
          harness.unitOfWork.run(async (tx) => {
            await tx.apiKeys.insert(newApiKey(org.id));
            throw conflict;
          }),
        );
        expect(error).to.equal(conflict);
        expect(await snapshot()).to.deep.equal(before);
      });

      it('the store keeps working after a failed run (nothing left locked or open)', async () => {
        for (let i = 0; i < 3; i++) {
          await rejectionOf(
            harness.unitOfWork.run(async (tx) => {
              await tx.apiKeys.insert(newApiKey(org.id));
              throw new InjectedFailure(`round ${i}`);
            }),
          );
        }
        const k = newApiKey(org.id);
        await harness.unitOfWork.run((tx) => tx.apiKeys.insert(k));
        expectApiKey(await stores().apiKeys.findById(org.id, k.id), k);
        await harness.health.ping();
        expect(await stores().apiKeys.countActive(org.id, at(0))).to.equal(2);
      });
    });

    describe('credential changes are declared (the fence)', () => {
      const writes: ReadonlyArray<readonly [string, (tx: Stores) => Promise<unknown>]> = [
        ['apiKeys.revoke', (tx) => tx.apiKeys.revoke(org.id, key.id, at(20))],
        ['apiKeys.shortenExpiry', (tx) => tx.apiKeys.shortenExpiry(org.id, key.id, at(90), at(20))],
        [
          'apiKeys.update',
          (tx) =>
            tx.apiKeys.update(
              org.id,
              key.id,
              {
                from: { label: key.label, metadata: {}, allowedCidrs: null, rateLimitPerMinute: null },
                to: { label: key.label, metadata: { a: 'b' }, allowedCidrs: ['10.0.0.0/8'], rateLimitPerMinute: 60 },
              },
              at(20),
            ),
        ],
        ['organisations.update', (tx) => tx.organisations.update(org.id, { name: 'After', updatedAt: at(20) })],
        ['organisations.putKeyPolicy', (tx) => tx.organisations.putKeyPolicy(org.id, { ...DEFAULT_KEY_POLICY, maxLifetimeSeconds: 86_400 }, at(20))],
      ];
      /** Units of work that do not name `org`: `run`, whose stores lack these writes (reached here by a cast), and changeCredentials of none or another organisation. */
      const undeclared: ReadonlyArray<readonly [string, (work: (tx: Stores) => Promise<unknown>) => Promise<unknown>]> = [
        ['run', (work) => harness.unitOfWork.run((tx) => work(tx as Stores))],
        ['changeCredentials([])', (work) => harness.unitOfWork.changeCredentials([], work)],
        ['changeCredentials([another organisation])', (work) => harness.unitOfWork.changeCredentials([randomUUID()], work)],
      ];
      for (const [write, call] of writes) {
        it(`C-36, C-57: ${write} of an organisation the unit of work did not declare throws UndeclaredCredentialChangeError and nothing of the run is written`, async () => {
          const before = await snapshot();
          for (const [unit, runIn] of undeclared) {
            const error = await rejectionOf(
              runIn(async (tx) => {
                await tx.audit.append(newAuditEntry(org.id));
                return call(tx);
              }),
            );
            expect(error, unit).to.be.instanceOf(UndeclaredCredentialChangeError);
            expect((error as UndeclaredCredentialChangeError).write).to.equal(write);
            expect((error as UndeclaredCredentialChangeError).organisationId).to.equal(org.id);
          }
          expect(await snapshot()).to.deep.equal(before);
          expect(await harness.unitOfWork.changeCredentials([randomUUID(), org.id], call)).to.not.equal(false);
          expect(await snapshot()).to.not.deep.equal(before);
        });
      }
    });

    describe('concurrency', () => {
      it('C-25: 20 parallel count-then-insert runs with a cap of 10 insert exactly 10', async () => {
        const CAP = 10;
        const empty = newOrganisation();
        await stores().organisations.create(empty);
        const outcomes = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            harness.unitOfWork.run(async (tx) => {
              const active = await tx.apiKeys.countActive(empty.id, at(0));
              if (active >= CAP) return 'refused' as const;
              await tx.apiKeys.insert(newApiKey(empty.id, { createdAt: at(i) }));
              return 'inserted' as const;
            }),
          ),
        );
        expect(outcomes.filter((o) => o === 'inserted')).to.have.length(CAP);
        expect(outcomes.filter((o) => o === 'refused')).to.have.length(20 - CAP);
        expect(await stores().apiKeys.countActive(empty.id, at(0))).to.equal(CAP);
        expect(await stores().apiKeys.list(empty.id, ALL)).to.have.length(CAP);
      });

      it('C-40: parallel runs, half of them failing, commit exactly the writes of the others', async () => {
        const keys = Array.from({ length: 10 }, (_, i) => newApiKey(org.id, { createdAt: at(100 + i) }));
        const results = await Promise.allSettled(
          keys.map((k, i) =>
            harness.unitOfWork.run(async (tx) => {
              await tx.apiKeys.insert(k);
              await tx.audit.append(
                newAuditEntry(org.id, { kind: 'api_key_issued', keyId: k.id, keyPrefix: k.keyPrefix, occurredAt: at(100 + i) }),
              );
              if (i % 2 === 1) throw new InjectedFailure(`run ${i}`);
              return k.id;
            }),
          ),
        );
        const committed = keys.filter((_, i) => i % 2 === 0).map((k) => k.id);
        expect(results.map((r) => r.status)).to.deep.equal(keys.map((_, i) => (i % 2 === 0 ? 'fulfilled' : 'rejected')));
        const listed = (await stores().apiKeys.list(org.id, ALL)).map((k) => k.id).filter((id) => id !== key.id);
        expect(listed).to.deep.equal(committed);
        const audited = (await stores().audit.list({ kind: 'api_key_issued' }, ALL)).map((e) => e.keyId);
        expect(audited).to.deep.equal(committed);
      });

      it('C-35: parallel revoke-and-audit runs of one key write exactly one revocation entry', async () => {
        const outcomes = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            harness.unitOfWork.changeCredentials([org.id], async (tx) => {
              const revoked = await tx.apiKeys.revoke(org.id, key.id, at(200 + i));
              if (revoked) {
                await tx.audit.append(
                  newAuditEntry(org.id, { kind: 'api_key_revoked', keyId: key.id, keyPrefix: key.keyPrefix, occurredAt: at(200 + i) }),
                );
              }
              return revoked;
            }),
          ),
        );
        expect(outcomes.filter((r) => r)).to.have.length(1);
        const entries = await stores().audit.list({ organisationId: org.id, kind: 'api_key_revoked' }, ALL);
        expect(entries).to.have.length(1);
        const revokedAt = (await stores().apiKeys.findById(org.id, key.id))!.revokedAt;
        expect(revokedAt?.getTime()).to.equal(entries[0]!.occurredAt.getTime());
      });
    });
  });
}
