/**
 * Scopes (least privilege, C-60): what an API key may do inside what its organisation (or, for a
 * platform key, the platform) lets it reach. A key holds a sorted, duplicate-free subset of a closed
 * set: the built-in scopes below plus any scope names the embedding service declared when it
 * created the core (CreateCoreOptions.scopes). Scopes are fixed at issue: a narrower key is a roll
 * with `scopes`, never a change of an existing key.
 */

/** The service's own scopes, sorted. */
export const BUILTIN_SCOPES = Object.freeze([
  'api_keys:read',
  'api_keys:write',
  'audit:read',
  'members:read',
  'organisations:read',
  'organisations:write',
  'webhooks:read',
  'webhooks:write',
] as const);

export type BuiltinScope = (typeof BUILTIN_SCOPES)[number];

/**
 * Scopes only keys of a system organisation may hold (C-270), never held by default: a key holds
 * one only when it is issued or rolled naming it. `keys:introspect` lets a key ask whether another
 * key is valid (POST /v1/introspect).
 */
export const PLATFORM_ONLY_SCOPES = Object.freeze(['keys:introspect'] as const);

export type PlatformOnlyScope = (typeof PLATFORM_ONLY_SCOPES)[number];

/** The scope of POST /v1/introspect. */
export const KEYS_INTROSPECT_SCOPE: PlatformOnlyScope = 'keys:introspect';

/** The detail of the 400 of a key of a standard organisation asking for a platform-only scope. */
export function platformOnlyScopeIssue(scope: string): string {
  return `${scope} may be held only by keys of a system organisation`;
}

/** True for a scope only keys of a system organisation may hold. */
export function isPlatformOnlyScope(scope: string): boolean {
  return (PLATFORM_ONLY_SCOPES as readonly string[]).includes(scope);
}

/** `resource:action`: lower-case letters, digits and `_`, each part 1..40 characters. */
export const SCOPE_NAME_PATTERN = /^[a-z][a-z0-9_]{0,39}:[a-z][a-z0-9_]{0,39}$/;

/** A sorted copy without duplicates (the one order in which scopes are stored and shown). */
export function sortedScopes(scopes: Iterable<string>): readonly string[] {
  return Object.freeze([...new Set(scopes)].sort());
}

/**
 * The closed set of one process: the built-in scopes, the platform-only ones, plus those an
 * embedding service declares.
 * A declared name must match SCOPE_NAME_PATTERN and must not repeat a built-in one (TypeError: a
 * programming error of the embedder, found at start-up).
 */
export function knownScopes(declared: readonly string[] = []): readonly string[] {
  const builtin = new Set<string>([...BUILTIN_SCOPES, ...PLATFORM_ONLY_SCOPES]);
  const seen = new Set<string>();
  for (const name of declared) {
    if (typeof name !== 'string' || !SCOPE_NAME_PATTERN.test(name)) {
      throw new TypeError(`invalid scope name ${JSON.stringify(name)}: use resource:action (lower-case letters, digits, _)`);
    }
    if (builtin.has(name) || seen.has(name)) throw new TypeError(`scope ${name} is declared twice`);
    seen.add(name);
  }
  return sortedScopes([...BUILTIN_SCOPES, ...PLATFORM_ONLY_SCOPES, ...declared]);
}

/** What a stored key without recorded scopes holds: every built-in scope (C-56: v1 keys answer as before). */
export const ALL_BUILTIN_SCOPES: readonly string[] = sortedScopes(BUILTIN_SCOPES);

/** The message of the 403 of an issue or roll asking for a scope the calling key does not hold. */
export const SCOPE_ESCALATION_MESSAGE = 'An API key cannot grant scopes it does not hold';
/** The message of the 403 of a key that lacks the scope an operation needs. */
export const MISSING_SCOPE_MESSAGE = 'This API key does not hold the scope this operation requires';

/** The detail of that 403: `{field: "scope", issue: "requires <scope>"}`. */
export function missingScopeIssue(scope: string): string {
  return `requires ${scope}`;
}

/** Encoding in a store column: the sorted names joined by single spaces (names never hold one). */
export function encodeScopes(scopes: readonly string[]): string {
  return scopes.join(' ');
}

export function decodeScopes(text: string): readonly string[] {
  return text === '' ? Object.freeze([]) : Object.freeze(text.split(' '));
}
