/**
 * Record builders for store tests: the contract suites' own (@cos/core/testing/contracts), with
 * real keys (generateRawKey + digestKey) where a test needs the raw key.
 */
import { ALL_BUILTIN_SCOPES, cryptoRandom, digestKey, generateRawKey, keyPrefixOf, type ApiKey, type AuditEntry } from '@cos/core';
import { newApiKey, newAuditEntry } from '@cos/core/testing/contracts';

export { T0, at, newMember as member, newOrganisation as organisation } from '@cos/core/testing/contracts';

let issued = 0;

/** A key record and the raw key it was made from (the raw key must never reach the store); live and test alternate. */
export function issuedKey(organisationId: string, overrides: Partial<ApiKey> = {}): { key: ApiKey; raw: string } {
  issued += 1;
  const raw = generateRawKey(issued % 2 === 1 ? 'live' : 'test', cryptoRandom);
  return {
    raw,
    key: newApiKey(organisationId, {
      keyPrefix: keyPrefixOf(raw),
      digest: digestKey(raw),
      scopes: ALL_BUILTIN_SCOPES,
      createdByKeyId: null,
      metadata: {},
      allowedCidrs: null,
      rateLimitPerMinute: null,
      ...overrides,
    }),
  };
}

/** An `organisation_created` entry (the kind these tests write first). */
export function auditEntry(organisationId: string, overrides: Partial<AuditEntry> = {}): AuditEntry {
  return newAuditEntry(organisationId, { kind: 'organisation_created', ...overrides });
}
