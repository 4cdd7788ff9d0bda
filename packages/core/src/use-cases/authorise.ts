/**
 * Authorisation (spec §5.3-§5.5, C-33, C-34): the one place that decides who may do what. The
 * operator may do everything; a platform key everything over HTTP; a standard key only its own
 * organisation. Every use case calls `authorise` first, before validation, so a standard key naming
 * another organisation gets 403 whether that id exists or is even well formed.
 *
 * `authorise` is exported so that an adapter can run the same check before work of its own that
 * C-33 puts after authorisation (the HTTP adapter reads and checks a request body only once the
 * caller may perform the operation). The use case still authorises itself: calling both is the
 * same rule twice, never two rules.
 */
import type { AuditActor } from '../domain/audit.js';
import { FOREIGN_ORGANISATION_MESSAGE, ForbiddenError, PLATFORM_REQUIRED_MESSAGE } from '../domain/errors.js';
import type { Principal } from '../domain/principal.js';

export const OPERATOR_REQUIRED_MESSAGE = 'This operation is reserved to the service operator';

/** Operations on the organisation named in the path (spec §5.4): a standard key only its own. */
export type OrganisationOperation =
  | 'organisations.get'
  | 'organisations.replace'
  | 'organisations.patch'
  | 'members.list'
  | 'api_keys.list'
  | 'api_keys.issue'
  | 'api_keys.get'
  | 'api_keys.revoke'
  | 'audit_events.list';

/** List and create organisations (spec §5.5): a platform key or the operator. */
export type PlatformOperation = 'organisations.list' | 'organisations.create';

/** Members add/remove, classify, audit list, system organisations: the operator (CLI) only. */
export type OperatorOperation =
  | 'organisations.create_system'
  | 'organisations.classify'
  | 'members.add'
  | 'members.remove'
  | 'audit.list'
  | 'webhooks.manage'
  | 'notifications.manage';

/** Every operation of the core that needs authorisation (a closed set). */
export type Operation = OrganisationOperation | PlatformOperation | OperatorOperation;

/** The organisation id argument `authorise` takes for `O`: one for organisation operations, none otherwise. */
export type OrganisationArgument<O extends Operation> = O extends OrganisationOperation ? [orgId: string] : [];

type Access = 'organisation' | 'platform' | 'operator';

const ACCESS_TABLE: Readonly<Record<Operation, Access>> = {
  'organisations.get': 'organisation',
  'organisations.replace': 'organisation',
  'organisations.patch': 'organisation',
  'members.list': 'organisation',
  'api_keys.list': 'organisation',
  'api_keys.issue': 'organisation',
  'api_keys.get': 'organisation',
  'api_keys.revoke': 'organisation',
  'audit_events.list': 'organisation',
  'organisations.list': 'platform',
  'organisations.create': 'platform',
  'organisations.create_system': 'operator',
  'organisations.classify': 'operator',
  'members.add': 'operator',
  'members.remove': 'operator',
  'audit.list': 'operator',
  'webhooks.manage': 'operator',
  'notifications.manage': 'operator',
};
// A Map, so that a name from plain JavaScript such as "toString" is unknown, not inherited.
const ACCESS: ReadonlyMap<string, Access> = new Map(Object.entries(ACCESS_TABLE));

/** The operation names, for adapters and tests that enumerate them. */
export const OPERATIONS: readonly Operation[] = Object.freeze(Object.keys(ACCESS_TABLE) as Operation[]);

/**
 * Throws ForbiddenError (403) unless `principal` may perform `operation`; organisation operations
 * also take the organisation id named in the request, raw (a standard key may name only its own;
 * ids are compared after lower-casing, as path ids are normalised, and an id that is not a string
 * is refused). It reads nothing but its arguments: no store, no clock.
 */
export function authorise<O extends Operation>(principal: Principal, operation: O, ...organisation: OrganisationArgument<O>): void {
  const access = ACCESS.get(operation);
  // A caller outside TypeScript naming no known operation is a programming error, never a grant.
  if (access === undefined) throw new TypeError(`unknown operation ${String(operation)}`);
  switch (access) {
    case 'operator':
      if (principal.kind !== 'operator') throw new ForbiddenError(OPERATOR_REQUIRED_MESSAGE);
      return;
    case 'platform':
      if (principal.kind === 'api_key' && !principal.isPlatform) throw new ForbiddenError(PLATFORM_REQUIRED_MESSAGE);
      return;
    case 'organisation': {
      if (principal.kind !== 'api_key' || principal.isPlatform) return;
      const orgId: unknown = organisation[0];
      if (typeof orgId !== 'string' || orgId.toLowerCase() !== principal.organisationId.toLowerCase()) {
        throw new ForbiddenError(FOREIGN_ORGANISATION_MESSAGE);
      }
      return;
    }
  }
}

/** The audit actor of a principal (C-40). */
export function actorOf(principal: Principal): AuditActor {
  if (principal.kind === 'api_key') return { type: 'api_key', keyId: principal.keyId };
  return principal.name !== undefined ? { type: 'operator', name: principal.name } : { type: 'operator' };
}
