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
 *
 * After the access rule, a key must hold the operation's scope (C-60, OPERATION_SCOPES): a 403 with
 * the detail `{field: "scope", issue: "requires <scope>"}`, so the order is 403 platform / other
 * organisation, then 403 scope, then whatever validation finds. The operator holds every scope.
 */
import type { AuditActor } from '../domain/audit.js';
import { FOREIGN_ORGANISATION_MESSAGE, ForbiddenError, PLATFORM_REQUIRED_MESSAGE } from '../domain/errors.js';
import type { KeyPrincipal, Principal } from '../domain/principal.js';
import { MISSING_SCOPE_MESSAGE, missingScopeIssue, type BuiltinScope, type PlatformOnlyScope } from '../domain/scopes.js';

export const OPERATOR_REQUIRED_MESSAGE = 'This operation is reserved to the service operator';

/** Operations on the organisation named in the path (spec §5.4): a standard key only its own. */
export type OrganisationOperation =
  | 'organisations.get'
  | 'organisations.replace'
  | 'organisations.patch'
  | 'members.list'
  | 'api_keys.list'
  | 'api_keys.issue'
  | 'api_keys.update'
  | 'api_keys.get'
  | 'api_keys.revoke'
  | 'organisations.key_policy.get'
  | 'organisations.rate_limit.get'
  | 'audit_events.list'
  | 'webhooks.read'
  | 'webhooks.write';

/** List and create organisations (spec §5.5), set a plan, introspect a key (C-270): a platform key or the operator. */
export type PlatformOperation =
  | 'organisations.list'
  | 'organisations.create'
  | 'organisations.key_policy.replace'
  | 'organisations.rate_limit.replace'
  | 'keys.introspect';

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
  'api_keys.update': 'organisation',
  'api_keys.get': 'organisation',
  'api_keys.revoke': 'organisation',
  'organisations.key_policy.get': 'organisation',
  'organisations.rate_limit.get': 'organisation',
  'audit_events.list': 'organisation',
  'webhooks.read': 'organisation',
  'webhooks.write': 'organisation',
  'organisations.list': 'platform',
  'organisations.create': 'platform',
  'organisations.key_policy.replace': 'platform',
  'organisations.rate_limit.replace': 'platform',
  'keys.introspect': 'platform',
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

/**
 * The scope a key needs for each operation it may reach (C-60); operator-only operations need none
 * (no key reaches them). Revoking a key needs api_keys:write, except the calling key itself
 * (authoriseRevocation).
 */
export const OPERATION_SCOPES: Readonly<Record<OrganisationOperation | PlatformOperation, BuiltinScope | PlatformOnlyScope>> = Object.freeze({
  'organisations.get': 'organisations:read',
  'organisations.list': 'organisations:read',
  'organisations.key_policy.get': 'organisations:read',
  'organisations.rate_limit.get': 'organisations:read',
  'organisations.replace': 'organisations:write',
  'organisations.patch': 'organisations:write',
  'organisations.create': 'organisations:write',
  'organisations.key_policy.replace': 'organisations:write',
  'organisations.rate_limit.replace': 'organisations:write',
  'members.list': 'members:read',
  'api_keys.list': 'api_keys:read',
  'api_keys.get': 'api_keys:read',
  'api_keys.issue': 'api_keys:write',
  'api_keys.update': 'api_keys:write',
  'api_keys.revoke': 'api_keys:write',
  'audit_events.list': 'audit:read',
  'webhooks.read': 'webhooks:read',
  'webhooks.write': 'webhooks:write',
  'keys.introspect': 'keys:introspect',
});
const SCOPE_OF: ReadonlyMap<string, string> = new Map(Object.entries(OPERATION_SCOPES));

/** The operation names, for adapters and tests that enumerate them. */
export const OPERATIONS: readonly Operation[] = Object.freeze(Object.keys(ACCESS_TABLE) as Operation[]);

/**
 * Throws ForbiddenError (403) unless `principal` may perform `operation`; organisation operations
 * also take the organisation id named in the request, raw (a standard key may name only its own;
 * ids are compared after lower-casing, as path ids are normalised, and an id that is not a string
 * is refused). It reads nothing but its arguments: no store, no clock.
 */
export function authorise<O extends Operation>(principal: Principal, operation: O, ...organisation: OrganisationArgument<O>): void {
  authoriseAccess(principal, operation, (organisation as readonly unknown[])[0]);
  if (principal.kind === 'api_key') requireScope(principal, SCOPE_OF.get(operation)!);
}

/**
 * DELETE of a key (C-60): the access rule of `api_keys.revoke`, and its scope unless the calling
 * key names itself: a key may always revoke itself, whatever its scopes (how a holder reacts to a
 * leak). Ids are compared lower-cased, as path ids are normalised.
 */
export function authoriseRevocation(principal: Principal, orgId: string, keyId: string): void {
  if (principal.kind === 'api_key' && typeof keyId === 'string' && keyId.toLowerCase() === principal.keyId.toLowerCase()) {
    authoriseAccess(principal, 'api_keys.revoke', orgId);
    return;
  }
  authorise(principal, 'api_keys.revoke', orgId);
}

/**
 * Throws ForbiddenError (403, detail `{field: "scope", issue: "requires <scope>"}`) unless the
 * principal holds `scope`; the operator holds every scope. For an embedding service's own routes
 * too: it passes one of the scope names it declared at createCore.
 */
export function requireScope(principal: Principal, scope: string): void {
  if (principal.kind !== 'api_key' || hasScope(principal, scope)) return;
  throw new ForbiddenError(MISSING_SCOPE_MESSAGE, [{ field: 'scope', issue: missingScopeIssue(scope) }]);
}

/** True when the key holds `scope` (a key's scopes are a short sorted list). */
export function hasScope(principal: KeyPrincipal, scope: string): boolean {
  return principal.scopes.includes(scope);
}

function authoriseAccess(principal: Principal, operation: Operation, orgId: unknown): void {
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
