/**
 * The guard every store applies to its credential-affecting writes (ApiKeyStore.revoke,
 * shortenExpiry and update, OrganisationStore.update and putKeyPolicy) inside a unit of work: the organisation
 * written must be one the unit of work named (`UnitOfWork.changeCredentials(organisationIds, work)`),
 * because only a named change is announced to the instances that cache credentials. The types
 * already keep these writes out of `UnitOfWork.run`; this is the second line of defence (a cast, a
 * wrong organisation id): an undeclared write throws before anything is written and the unit of
 * work rolls back.
 */
export class UndeclaredCredentialChangeError extends Error {
  override readonly name = 'UndeclaredCredentialChangeError';
  constructor(
    readonly write: string,
    readonly organisationId: string,
  ) {
    super(`${write} of organisation ${organisationId} in a unit of work that did not declare it (UnitOfWork.changeCredentials(organisationIds, work))`);
  }
}

/** Throws UndeclaredCredentialChangeError unless `organisationId` is in `declared`. */
export function assertCredentialChangeDeclared(declared: ReadonlySet<string>, organisationId: string, write: string): void {
  if (!declared.has(organisationId)) throw new UndeclaredCredentialChangeError(write, organisationId);
}
