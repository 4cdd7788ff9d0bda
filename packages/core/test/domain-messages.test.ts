/**
 * The sentences of conflicts and of a missing organisation are core's (C-13): stores name the rule
 * that broke, core words it. An UnavailableError says what was unavailable by its reason.
 */
import { expect } from 'chai';
import {
  KEY_ALREADY_ROLLED_MESSAGE,
  NotFoundError,
  OPERATOR,
  STORE_UNAVAILABLE_MESSAGE,
  WEBHOOK_NOT_FOUND_MESSAGE,
  ORGANISATION_NOT_FOUND_MESSAGE,
  UnavailableError,
  isDomainErrorWithCode,
  organisationNotFound,
  storeUnavailable,
  uniqueConflict,
  type UniqueRule,
} from '@cos/core';
import { createTestCore } from '@cos/core/testing';

describe('domain: messages owned by the domain', () => {
  it('C-13: uniqueConflict gives each uniqueness rule its one sentence and details', () => {
    const expected: Record<UniqueRule, { message: string; details: { field: string; issue: string }[] }> = {
      slug: { message: 'Slug already taken', details: [{ field: 'slug', issue: 'already taken' }] },
      email: { message: 'A member with this e-mail already exists in the organisation', details: [{ field: 'email', issue: 'already taken' }] },
      digest: { message: 'An API key with this digest already exists', details: [{ field: 'key', issue: 'already exists' }] },
      rolled_key: { message: KEY_ALREADY_ROLLED_MESSAGE, details: [] },
      id: { message: 'A record with this id already exists', details: [{ field: 'id', issue: 'already exists' }] },
      unknown: { message: 'The record conflicts with an existing one', details: [] },
    };
    for (const [rule, { message, details }] of Object.entries(expected) as [UniqueRule, (typeof expected)[UniqueRule]][]) {
      const error = uniqueConflict(rule);
      expect(isDomainErrorWithCode(error, 'CONFLICT'), rule).to.equal(true);
      expect(error.message, rule).to.equal(message);
      expect(error.details, rule).to.deep.equal(details);
    }
    expect(uniqueConflict('id', 'Organisation').message).to.equal('Organisation id already exists');
  });

  it('organisationNotFound is the 404 with the one sentence', () => {
    const error = organisationNotFound();
    expect(isDomainErrorWithCode(error, 'NOT_FOUND')).to.equal(true);
    expect(error.message).to.equal(ORGANISATION_NOT_FOUND_MESSAGE);
    expect(ORGANISATION_NOT_FOUND_MESSAGE).to.equal('Organisation not found');
    expect(error.resource).to.equal('organisation');
  });

  it('a NotFoundError says which resource was missing, so callers branch on it and never on the sentence', async () => {
    expect(new NotFoundError().resource).to.equal('resource');
    const { core } = createTestCore();
    const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    const missing = async (call: () => Promise<unknown>): Promise<NotFoundError> => {
      try {
        await call();
      } catch (e) {
        expect(e).to.be.instanceOf(NotFoundError);
        return e as NotFoundError;
      }
      throw new Error('expected a NotFoundError');
    };
    const noEndpoint = await missing(() => core.webhooks.remove(OPERATOR, org.id));
    expect([noEndpoint.resource, noEndpoint.message]).to.deep.equal(['webhook', WEBHOOK_NOT_FOUND_MESSAGE]);
    expect((await missing(() => core.webhooks.remove(OPERATOR, '00000000-0000-4000-8000-000000000000'))).resource).to.equal('organisation');
    expect((await missing(() => core.apiKeys.revoke(OPERATOR, org.id, '00000000-0000-4000-8000-000000000000'))).resource).to.equal('api_key');
    expect((await missing(() => core.members.remove(OPERATOR, org.id, '00000000-0000-4000-8000-000000000000'))).resource).to.equal('member');
  });

  it('an UnavailableError is the store by default, and says credential_fence when given', () => {
    expect(new UnavailableError().reason).to.equal('store');
    expect(new UnavailableError('m', { reason: 'credential_fence' }).reason).to.equal('credential_fence');
    expect(new UnavailableError('m', { reason: 'credential_fence' }).message).to.equal('m');
  });

  it('C-17: storeUnavailable is the store\'s 503 with the one sentence, keeping the driver error as its cause', () => {
    const driver = new Error('connect ECONNREFUSED 127.0.0.1:5432');
    const error = storeUnavailable(driver);
    expect(isDomainErrorWithCode(error, 'SERVICE_UNAVAILABLE')).to.equal(true);
    expect([error.message, error.reason, error.cause]).to.deep.equal([STORE_UNAVAILABLE_MESSAGE, 'store', driver]);
    expect(STORE_UNAVAILABLE_MESSAGE).to.equal('The store is unavailable; retry with exponential backoff');
  });
});
