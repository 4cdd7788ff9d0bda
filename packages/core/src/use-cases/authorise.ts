/**
 * Authorisation (spec §5.3-§5.5, C-33, C-34). The operator may do everything; a platform key
 * everything over HTTP; a standard key only its own organisation. Runs before validation, so a
 * standard key naming another organisation gets 403 whether that id exists or is even well formed.
 */
import type { AuditActor } from '../domain/audit.js';
import { FOREIGN_ORGANISATION_MESSAGE, ForbiddenError, PLATFORM_REQUIRED_MESSAGE } from '../domain/errors.js';
import type { Principal } from '../domain/principal.js';

export const OPERATOR_REQUIRED_MESSAGE = 'This operation is reserved to the service operator';

/** List and create organisations: platform key or operator. */
export function requirePlatform(principal: Principal): void {
  if (principal.kind === 'api_key' && !principal.isPlatform) throw new ForbiddenError(PLATFORM_REQUIRED_MESSAGE);
}

/** Members add/remove, classify, audit list, system organisations: the operator (CLI) only. */
export function requireOperator(principal: Principal): void {
  if (principal.kind !== 'operator') throw new ForbiddenError(OPERATOR_REQUIRED_MESSAGE);
}

/**
 * Access to the organisation named in the path: a standard key only to its own (compared after
 * lower-casing, as path ids are normalised), anyone else to any.
 */
export function requireOrganisationAccess(principal: Principal, rawOrgId: unknown): void {
  if (principal.kind !== 'api_key' || principal.isPlatform) return;
  if (typeof rawOrgId !== 'string' || rawOrgId.toLowerCase() !== principal.organisationId.toLowerCase()) {
    throw new ForbiddenError(FOREIGN_ORGANISATION_MESSAGE);
  }
}

/** The audit actor of a principal (C-40). */
export function actorOf(principal: Principal): AuditActor {
  return principal.kind === 'api_key' ? { type: 'api_key', keyId: principal.keyId } : { type: 'operator' };
}
