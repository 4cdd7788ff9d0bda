/**
 * Editing a key after issue (C-261): its label, metadata, allowed networks and own limit per minute
 * (C-290), nothing else (scopes,
 * environment and expiry are fixed for life: a different key is a roll). And the rule that keeps
 * network restrictions from widening (C-264): whatever a restricted key issues, rolls or edits
 * stays inside its own networks.
 */
import { allowedCidrsOf, keyRateLimitOf, keyStatus, metadataOf, METADATA_MAX_KEYS, type ApiKey } from '../domain/api-key.js';
import type { AuditActor } from '../domain/audit.js';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../domain/errors.js';
import { cidrsWithin } from '../domain/key-network.js';
import type { Organisation } from '../domain/organisation.js';
import type { Principal } from '../domain/principal.js';
import type { CoreDeps } from '../deps.js';
import type { KeyAttributes } from '../ports/api-key-store.js';
import type { OuterStores, Stores } from '../ports/unit-of-work.js';
import type { PatchKeyInput } from '../validation/api-key.js';
import { ISSUE_METADATA_SIZE } from '../validation/key-attributes.js';
import { auditEntry } from './audit-entry.js';
import { requireOrganisation } from './require-organisation.js';

export const KEY_NOT_FOUND_MESSAGE = 'API key not found';
const KEY_REVOKED_UPDATE_MESSAGE = 'This API key is revoked and cannot be changed';
const KEY_EXPIRED_UPDATE_MESSAGE = 'This API key has expired and cannot be changed';
const KEY_CHANGED_CONCURRENTLY_MESSAGE = 'This API key was changed by another request at the same time; read it and try again';
const WIDER_CIDRS_MESSAGE = 'An API key restricted to networks cannot allow a key addresses outside them';
const ISSUE_WIDER_CIDRS = "must lie within the calling key's allowed_cidrs";

/** The detail of a key limit above its organisation's (C-291). */
function keyLimitAboveIssue(organisationPerMinute: number): string {
  return `must not be above the organisation's limit of ${organisationPerMinute} requests per minute`;
}

/**
 * 400 `rate_limit_per_minute` (C-291) when a key's own limit `asked` is above its organisation's
 * effective limit: its plan, or `defaultPerMinute` (RATE_LIMIT_PER_MINUTE) without one.
 */
export function refuseKeyLimitAbove(organisation: Pick<Organisation, 'rateLimitPerMinute'>, asked: number | null | undefined, defaultPerMinute: number): void {
  if (asked === null || asked === undefined) return;
  const limit = organisation.rateLimitPerMinute ?? defaultPerMinute;
  if (asked > limit) throw new ValidationError([{ field: 'rate_limit_per_minute', issue: keyLimitAboveIssue(limit) }]);
}

/** Compare-and-set attempts of one update before it is refused as a conflict (each re-reads the key). */
const UPDATE_ATTEMPTS = 3;

/**
 * The networks of the key that is calling (null: any address, and for the operator), read in this
 * unit of work so that a restriction just tightened counts.
 */
export async function callerCidrs(stores: Pick<OuterStores, 'apiKeys'>, principal: Principal): Promise<readonly string[] | null> {
  if (principal.kind !== 'api_key') return null;
  const caller = await stores.apiKeys.findById(principal.organisationId, principal.keyId);
  return caller === null ? null : allowedCidrsOf(caller);
}

/** 403 (C-264) unless a key restricted to `cidrs` is no wider than the caller (`callers`). */
export function refuseWiderCidrs(cidrs: readonly string[] | null, callers: readonly string[] | null): void {
  if (!cidrsWithin(cidrs, callers)) throw new ForbiddenError(WIDER_CIDRS_MESSAGE, [{ field: 'allowed_cidrs', issue: ISSUE_WIDER_CIDRS }]);
}

/**
 * The networks a new key gets (C-264): those asked for, which must lie within the caller's; none
 * asked for: the caller's own (any address for the operator and an unrestricted key).
 */
export async function newKeyCidrs(stores: Pick<OuterStores, 'apiKeys'>, principal: Principal, asked: readonly string[] | null | undefined): Promise<readonly string[] | null> {
  const callers = await callerCidrs(stores, principal);
  if (asked === undefined) return callers;
  refuseWiderCidrs(asked, callers);
  return asked;
}

function mergedMetadata(current: Readonly<Record<string, string>>, patch: PatchKeyInput['metadata']): Record<string, string> {
  if (patch === undefined) return { ...current };
  const entries = new Map(Object.entries(current));
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) entries.delete(name);
    else entries.set(name, value);
  }
  return Object.fromEntries(entries);
}

function sameMetadata(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const names = Object.keys(a);
  return names.length === Object.keys(b).length && names.every((n) => Object.hasOwn(b, n) && b[n] === a[n]);
}

function sameCidrs(a: readonly string[] | null, b: readonly string[] | null): boolean {
  if (a === null || b === null) return a === b;
  return a.length === b.length && a.every((c, i) => c === b[i]);
}

/** The names of the fields `to` changes, sorted. */
function changedFields(from: KeyAttributes, to: KeyAttributes): string[] {
  const changed: string[] = [];
  if (!sameCidrs(from.allowedCidrs, to.allowedCidrs)) changed.push('allowed_cidrs');
  if (from.label !== to.label) changed.push('label');
  if (!sameMetadata(from.metadata, to.metadata)) changed.push('metadata');
  if (from.rateLimitPerMinute !== to.rateLimitPerMinute) changed.push('rate_limit_per_minute');
  return changed;
}

function notActive(key: ApiKey, now: Date): ConflictError | null {
  const status = keyStatus(key, now);
  if (status === 'revoked') return new ConflictError(KEY_REVOKED_UPDATE_MESSAGE);
  if (status === 'expired') return new ConflictError(KEY_EXPIRED_UPDATE_MESSAGE);
  return null;
}

/**
 * Applies `input` to the key inside the caller's unit of work (which must declare the organisation's
 * credentials changed): 404 for an unknown key, 409 for a revoked or expired one, 400 `metadata`
 * when the merged metadata would hold more than METADATA_MAX_KEYS names, 403 for networks wider than
 * the calling key's, 400 `rate_limit_per_minute` for a key limit above the organisation's (C-291).
 * Nothing changed: the key as it is, no write, no entry. Otherwise one compare-and-set write and an
 * `api_key_updated` entry naming the changed fields (never metadata values; the networks and the
 * key limit, which are not secret, when they changed).
 */
export async function updateKeyIn(
  stores: Stores,
  deps: Pick<CoreDeps, 'random' | 'config'>,
  organisationId: string,
  keyId: string,
  input: PatchKeyInput,
  actor: AuditActor,
  principal: Principal,
  now: Date,
): Promise<ApiKey> {
  for (let attempt = 1; ; attempt += 1) {
    const key = await stores.apiKeys.findById(organisationId, keyId);
    if (key === null) throw new NotFoundError(KEY_NOT_FOUND_MESSAGE, { resource: 'api_key' });
    const refusal = notActive(key, now);
    if (refusal !== null) throw refusal;
    const from: KeyAttributes = { label: key.label, metadata: metadataOf(key), allowedCidrs: allowedCidrsOf(key), rateLimitPerMinute: keyRateLimitOf(key) };
    const to: KeyAttributes = {
      label: input.label ?? from.label,
      metadata: mergedMetadata(from.metadata, input.metadata),
      allowedCidrs: input.allowedCidrs !== undefined ? input.allowedCidrs : from.allowedCidrs,
      rateLimitPerMinute: input.rateLimitPerMinute !== undefined ? input.rateLimitPerMinute : from.rateLimitPerMinute,
    };
    if (Object.keys(to.metadata).length > METADATA_MAX_KEYS) throw new ValidationError([{ field: 'metadata', issue: ISSUE_METADATA_SIZE }]);
    if (input.allowedCidrs !== undefined) refuseWiderCidrs(to.allowedCidrs, await callerCidrs(stores, principal));
    if (typeof input.rateLimitPerMinute === 'number' && input.rateLimitPerMinute !== from.rateLimitPerMinute) {
      refuseKeyLimitAbove(await requireOrganisation(stores.organisations, organisationId), input.rateLimitPerMinute, deps.config.rateLimitPerMinute);
    }
    const changed = changedFields(from, to);
    if (changed.length === 0) return key;
    if (await stores.apiKeys.update(organisationId, keyId, { from, to }, now)) {
      const entry = {
        ...auditEntry(deps.random, 'api_key_updated', now, actor, organisationId, key),
        changedFields: changed,
        ...(changed.includes('allowed_cidrs') ? { allowedCidrs: to.allowedCidrs } : {}),
        ...(changed.includes('rate_limit_per_minute') ? { rateLimit: { old: from.rateLimitPerMinute, new: to.rateLimitPerMinute } } : {}),
      };
      await stores.audit.append(entry);
      return { ...key, label: to.label, metadata: to.metadata, allowedCidrs: to.allowedCidrs, rateLimitPerMinute: to.rateLimitPerMinute };
    }
    // Revoked, expired or changed since it was read: read it again (a revocation is answered as such).
    if (attempt === UPDATE_ATTEMPTS) throw new ConflictError(KEY_CHANGED_CONCURRENTLY_MESSAGE);
  }
}
