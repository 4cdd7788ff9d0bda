/**
 * Record builders for the contract suites. Ids are real UUIDs (a Postgres store keeps them in uuid
 * columns) and every timestamp carries milliseconds, so a store that drops them is caught.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { ApiKey } from '../../domain/api-key.js';
import type { AuditEntry } from '../../domain/audit.js';
import { ConflictError, type ErrorDetail } from '../../domain/errors.js';
import type { Member } from '../../domain/member.js';
import type { Organisation } from '../../domain/organisation.js';
import type { Notification, WebhookEndpoint } from '../../domain/webhook.js';
import type { Stores } from '../../ports/unit-of-work.js';
import { expect } from 'chai';
import type { StoreHarness, StoreHarnessFactory } from '../harness.js';

/** 2026-03-01T09:15:42.123Z: an instant with non-zero milliseconds. */
export const T0 = new Date('2026-03-01T09:15:42.123Z');

export const at = (offsetMs: number, base: Date = T0): Date => new Date(base.getTime() + offsetMs);

let sequence = 0;
/** Unique per process, so suites that share a database across runs never collide on slugs. */
function unique(): string {
  sequence += 1;
  return `${randomBytes(4).toString('hex')}${sequence.toString(36)}`;
}

/**
 * A harness's stores with every port method, as its implementation has them: the contract suites
 * test the credential-affecting writes (ApiKeyStore.revoke and shortenExpiry, OrganisationStore.update
 * and putKeyPolicy) outside a unit of work too, which the OuterStores type hosts hold leaves out.
 */
export function storePorts(harness: Pick<StoreHarness, 'stores'>): Stores {
  return harness.stores as Stores;
}

export function newOrganisation(overrides: Partial<Organisation> = {}): Organisation {
  return {
    id: randomUUID(),
    name: `Organisation ${unique()}`,
    slug: `org-${unique()}`,
    industrySection: null,
    isSystem: false,
    rateLimitPerMinute: null,
    createdAt: T0,
    updatedAt: T0,
    ...overrides,
  };
}

export function newMember(organisationId: string, overrides: Partial<Member> = {}): Member {
  return {
    id: randomUUID(),
    organisationId,
    email: `member-${unique()}@example.com`,
    createdAt: T0,
    ...overrides,
  };
}

/** A random lower-case hex SHA-256-sized digest. */
export const newDigest = (): string => randomBytes(32).toString('hex');

export function newApiKey(organisationId: string, overrides: Partial<ApiKey> = {}): ApiKey {
  return {
    id: randomUUID(),
    organisationId,
    label: `key ${unique()}`,
    keyPrefix: `svc_live_${randomBytes(2).toString('hex').slice(0, 3)}`,
    digest: newDigest(),
    expiresAt: null,
    createdAt: T0,
    revokedAt: null,
    lastUsedAt: null,
    rolledFromKeyId: null,
    ...overrides,
  };
}

export function newAuditEntry(organisationId: string, overrides: Partial<AuditEntry> = {}): AuditEntry {
  return {
    id: randomUUID(),
    kind: 'organisation_updated',
    occurredAt: T0,
    organisationId,
    keyId: null,
    keyPrefix: null,
    actor: { type: 'operator' },
    ...overrides,
  };
}

export function newWebhookEndpoint(organisationId: string, overrides: Partial<WebhookEndpoint> = {}): WebhookEndpoint {
  return {
    organisationId,
    url: `https://hooks.example.com/${unique()}`,
    secret: `whsec_${randomBytes(32).toString('base64')}`,
    createdAt: T0,
    updatedAt: T0,
    ...overrides,
  };
}

/** A pending outbox record due at T0 (ids are text: `msg_` + hex, as the core makes them). */
export function newOutboxNotification(organisationId: string, overrides: Partial<Notification> = {}): Notification {
  return {
    id: `msg_${randomBytes(16).toString('hex')}`,
    organisationId,
    type: 'api_key.revoked',
    payload: JSON.stringify({ type: 'api_key.revoked', timestamp: T0.toISOString(), data: { organisation_id: organisationId, n: unique() } }),
    status: 'pending',
    attempts: 0,
    nextAttemptAt: T0,
    createdAt: T0,
    completedAt: null,
    lastError: null,
    ...overrides,
  };
}

/** `count` fresh UUIDs in ascending (binary) order. */
export function ascendingIds(count: number): string[] {
  return Array.from({ length: count }, () => randomUUID()).sort();
}

/** Awaits `promise`, expects it to reject, and returns the rejection. */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  expect.fail('expected the call to reject, but it resolved');
}

/** Expects a ConflictError (code CONFLICT, a message); returns it. */
export async function expectConflictError(promise: Promise<unknown>): Promise<ConflictError> {
  const error = await rejectionOf(promise);
  expect(error, String(error)).to.be.instanceOf(ConflictError);
  const conflict = error as ConflictError;
  expect(conflict.code).to.equal('CONFLICT');
  expect(conflict.message).to.be.a('string').and.not.equal('');
  return conflict;
}

/** Expects a ConflictError whose details name `field` (and `issue`, when given); returns it. */
export async function expectConflict(promise: Promise<unknown>, field: string, issue?: string): Promise<ConflictError> {
  const conflict = await expectConflictError(promise);
  const fields = conflict.details.map((d: ErrorDetail) => d.field);
  expect(fields, 'ConflictError details name the field').to.include(field);
  if (issue !== undefined) expect(conflict.details).to.deep.include({ field, issue });
  return conflict;
}

/** Expects `actual` to be a Date at exactly the same millisecond as `expected`. */
export function expectSameInstant(actual: unknown, expected: Date, what: string): void {
  expect(actual, `${what} is a Date`).to.be.instanceOf(Date);
  expect((actual as Date).getTime(), `${what} at ms precision`).to.equal(expected.getTime());
}

export interface TwoOrganisations {
  readonly harness: StoreHarness;
  readonly orgA: Organisation;
  readonly orgB: Organisation;
}

/**
 * Registers mocha hooks (call inside a describe): before each test a fresh store holding two plain
 * organisations, closed after it. Returns the current one.
 */
export function eachWithTwoOrganisations(factory: StoreHarnessFactory): () => TwoOrganisations {
  let current: TwoOrganisations | null = null;
  beforeEach(async () => {
    const harness = await factory();
    const orgA = newOrganisation();
    const orgB = newOrganisation();
    await harness.stores.organisations.create(orgA);
    await harness.stores.organisations.create(orgB);
    current = { harness, orgA, orgB };
  });
  afterEach(async () => {
    await current?.harness.close();
    current = null;
  });
  return () => {
    if (current === null) throw new Error('no store: eachWithTwoOrganisations is used outside a test');
    return current;
  };
}
