/** Record builders for store tests: real keys (generateRawKey + digestKey), distinct ids. */
import { randomUUID } from 'node:crypto';
import {
  ALL_BUILTIN_SCOPES,
  cryptoRandom,
  digestKey,
  generateRawKey,
  keyPrefixOf,
  type ApiKey,
  type AuditEntry,
  type Member,
  type Organisation,
} from '@cos/core';

export const T0 = new Date('2026-06-10T08:00:00.123Z');

export function at(offsetMs: number): Date {
  return new Date(T0.getTime() + offsetMs);
}

let seq = 0;

export function organisation(overrides: Partial<Organisation> = {}): Organisation {
  seq += 1;
  return {
    id: randomUUID(),
    name: `Organisation ${seq}`,
    slug: `org-${seq}-${randomUUID().slice(0, 8)}`,
    industrySection: null,
    isSystem: false,
    createdAt: T0,
    updatedAt: T0,
    ...overrides,
  };
}

export function member(organisationId: string, overrides: Partial<Member> = {}): Member {
  seq += 1;
  return { id: randomUUID(), organisationId, email: `person${seq}@example.com`, createdAt: T0, ...overrides };
}

/** A key record and the raw key it was made from (the raw key must never reach the store). */
export function issuedKey(organisationId: string, overrides: Partial<ApiKey> = {}): { key: ApiKey; raw: string } {
  const raw = generateRawKey(seq % 2 === 0 ? 'live' : 'test', cryptoRandom);
  seq += 1;
  return {
    raw,
    key: {
      id: randomUUID(),
      organisationId,
      label: `key ${seq}`,
      keyPrefix: keyPrefixOf(raw),
      digest: digestKey(raw),
      expiresAt: null,
      createdAt: T0,
      revokedAt: null,
      lastUsedAt: null,
      rolledFromKeyId: null,
      scopes: ALL_BUILTIN_SCOPES,
      createdByKeyId: null,
      ...overrides,
    },
  };
}

export function auditEntry(organisationId: string, overrides: Partial<AuditEntry> = {}): AuditEntry {
  return {
    id: randomUUID(),
    kind: 'organisation_created',
    occurredAt: T0,
    organisationId,
    keyId: null,
    keyPrefix: null,
    actor: { type: 'operator' },
    ...overrides,
  };
}
