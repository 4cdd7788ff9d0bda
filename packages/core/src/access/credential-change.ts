/**
 * The guard every store applies to its credential-affecting writes (ApiKeyStore.revoke, update and
 * shortenExpiry, OrganisationStore.update) inside a unit of work: the organisation written must be
 * one the unit of work declared (`UnitOfWork.run(work, { changesCredentialsOf })`), because only a
 * declared change is announced to the instances that cache credentials. An undeclared write is a
 * programming error: it throws before anything is written and the unit of work rolls back.
 */
import type { WorkDeclaration } from '../ports/unit-of-work.js';

export class UndeclaredCredentialChangeError extends Error {
  override readonly name = 'UndeclaredCredentialChangeError';
  constructor(
    readonly write: string,
    readonly organisationId: string,
  ) {
    super(`${write} of organisation ${organisationId} in a unit of work that did not declare it (UnitOfWork.run(work, { changesCredentialsOf }))`);
  }
}

/** The organisations a unit of work may change credentials of, as a set (empty when none). */
export function declaredOrganisations(declaration: WorkDeclaration | undefined): ReadonlySet<string> {
  const ids = declaration?.changesCredentialsOf;
  return ids === undefined || ids.length === 0 ? NONE : new Set(ids);
}

const NONE: ReadonlySet<string> = new Set();

/** Throws UndeclaredCredentialChangeError unless `organisationId` is in `declared`. */
export function assertCredentialChangeDeclared(declared: ReadonlySet<string>, organisationId: string, write: string): void {
  if (!declared.has(organisationId)) throw new UndeclaredCredentialChangeError(write, organisationId);
}

/** The declaration of a unit of work that changes the credentials (or the record) of `organisationId`. */
export function changesCredentialsOf(organisationId: string): WorkDeclaration {
  return { changesCredentialsOf: [organisationId] };
}
