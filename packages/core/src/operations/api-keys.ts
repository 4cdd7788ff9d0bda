import {
  allowedCidrsOf,
  digestKey,
  generateRawKey,
  keyEnvironmentOf,
  keyPrefixOf,
  keyRateLimitOf,
  keyStatus,
  metadataOf,
  scopesOf,
  KEY_ALREADY_ROLLED_MESSAGE,
  type ApiKey,
  type KeyEnvironment,
} from '../domain/api-key.js';
import type { AuditActor } from '../domain/audit.js';
import { ConflictError, ForbiddenError, NotFoundError, organisationNotFound, ValidationError } from '../domain/errors.js';
import { DEFAULT_KEY_POLICY, lifetimeText, type KeyPolicy } from '../domain/key-policy.js';
import type { Organisation } from '../domain/organisation.js';
import type { KeyPrincipal, Principal } from '../domain/principal.js';
import { ALL_BUILTIN_SCOPES, isPlatformOnlyScope, platformOnlyScopeIssue, SCOPE_ESCALATION_MESSAGE } from '../domain/scopes.js';
import type { OuterStores } from '../ports/unit-of-work.js';
import type { IssueKeyInput } from '../validation/api-key.js';
import { checkIssueKey, checkPatchKey, checkRollKey } from '../validation/api-key.js';
import { checkUuid } from '../validation/ids.js';
import { all } from '../validation/issues.js';
import { checkKeyListQuery } from '../validation/key-list-query.js';
import { auditEntry } from './audit-entry.js';
import { causeOf, notifyKeyEvents, type KeyEvent } from './key-events.js';
import { actorOf, authorise, authoriseRevocation } from '../access/authorise.js';
import type { CoreDeps } from '../deps.js';
import type { Page } from './page.js';
import { paginate } from './paginate.js';
import { requireOrganisation } from './require-organisation.js';
import { callerCidrs, KEY_NOT_FOUND_MESSAGE, newKeyCidrs, refuseKeyLimitAbove, refuseWiderCidrs, updateKeyIn } from './key-update.js';

/** The issuance result: the only place the raw key ever appears (spec §5.6, C-22). */
export interface IssuedKey {
  readonly key: ApiKey;
  readonly rawKey: string;
}

/** GET /v1/me: the calling key's record and its organisation's (never the raw key or its digest). */
export interface WhoAmI {
  readonly key: ApiKey;
  readonly organisation: Organisation;
}

/** A roll's result: the new key (its rolledFromKeyId names the old one) and its raw key, shown once. */
export type RolledKey = IssuedKey;

export { KEY_NOT_FOUND_MESSAGE };
export const KEY_REVOKED_ROLL_MESSAGE = 'This API key is revoked and cannot be rolled; issue a new key instead';
export const KEY_EXPIRED_ROLL_MESSAGE = 'This API key has expired and cannot be rolled; issue a new key instead';

/** The 409 of a roll of a key that is not (or no longer) active and unrolled. */
function rollRefusal(key: ApiKey, now: Date): ConflictError {
  const status = keyStatus(key, now);
  if (status === 'revoked') return new ConflictError(KEY_REVOKED_ROLL_MESSAGE);
  if (status === 'expired') return new ConflictError(KEY_EXPIRED_ROLL_MESSAGE);
  return new ConflictError(KEY_ALREADY_ROLLED_MESSAGE);
}

interface NewKeySpec {
  readonly label: string;
  readonly environment: KeyEnvironment;
  readonly expiresAt: Date | null;
  readonly rolledFromKeyId: string | null;
  readonly scopes: readonly string[];
  readonly createdByKeyId: string | null;
  readonly metadata: Readonly<Record<string, string>>;
  readonly allowedCidrs: readonly string[] | null;
  readonly rateLimitPerMinute: number | null;
}

export const ISSUE_ENVIRONMENT_NOT_ALLOWED = "is not allowed by the organisation's key policy";

/**
 * The latest expiry a new key may have, and what set it: the organisation's maximum key lifetime
 * (`maxLifetimeSeconds` from now) or the issuing key's own expiry, whichever is earlier.
 */
export type ExpiryCap =
  | { readonly at: Date; readonly by: 'policy'; readonly maxLifetimeSeconds: number }
  | { readonly at: Date; readonly by: 'issuer' };

/** The detail of an expires_at later than the cap allows, naming the bound that set it. */
export function expiresAtCapIssue(cap: ExpiryCap): string {
  const why = cap.by === 'policy' ? `the organisation's maximum key lifetime, ${lifetimeText(cap.maxLifetimeSeconds)}` : "the issuing key's own expiry";
  return `must not be later than ${cap.at.toISOString()} (${why})`;
}

/** 403 (C-60) unless every one of `scopes` is held by the calling key (the operator holds all). */
function refuseEscalation(principal: Principal, scopes: readonly string[]): void {
  if (principal.kind !== 'api_key') return;
  const held = new Set(principal.scopes);
  if (!scopes.every((s) => held.has(s))) throw new ForbiddenError(SCOPE_ESCALATION_MESSAGE);
}

/**
 * 400 `scopes` (C-270) when a key of a standard organisation is to hold a platform-only scope it
 * names (`asked`).
 */
function refusePlatformOnly(organisation: Organisation, asked: readonly string[] | null): void {
  if (organisation.isSystem || asked === null) return;
  const scope = asked.find(isPlatformOnlyScope);
  if (scope !== undefined) throw new ValidationError([{ field: 'scopes', issue: platformOnlyScopeIssue(scope) }]);
}

/**
 * The scopes a key issued without naming any holds: its issuer's (the operator's: every built-in
 * scope), less the platform-only ones when the key is not a system organisation's (C-270): a
 * platform key inherits nothing a standard key may not hold.
 */
function inheritedScopes(organisation: Organisation, principal: Principal): readonly string[] {
  if (principal.kind !== 'api_key') return ALL_BUILTIN_SCOPES;
  return organisation.isSystem ? principal.scopes : principal.scopes.filter((s) => !isPlatformOnlyScope(s));
}

/**
 * The latest expiry a key issued or rolled now may have (C-60, C-62): the calling key's own expiry
 * (read in this unit of work, so a shortened one counts) and now + the policy's maximum lifetime,
 * whichever is earlier (the policy when both are the same); null when neither applies.
 */
async function expiryCap(stores: OuterStores, principal: Principal, policy: KeyPolicy, now: Date): Promise<ExpiryCap | null> {
  let cap: ExpiryCap | null =
    policy.maxLifetimeSeconds === null
      ? null
      : { at: new Date(now.getTime() + policy.maxLifetimeSeconds * 1000), by: 'policy', maxLifetimeSeconds: policy.maxLifetimeSeconds };
  if (principal.kind === 'api_key') {
    const issuer = await stores.apiKeys.findById(principal.organisationId, principal.keyId);
    if (issuer?.expiresAt != null && (cap === null || issuer.expiresAt.getTime() < cap.at.getTime())) cap = { at: issuer.expiresAt, by: 'issuer' };
  }
  return cap;
}

/** The organisation's key policy as of this unit of work (the default when it never set one). */
export async function keyPolicyIn(stores: { readonly organisations: Pick<OuterStores['organisations'], 'findKeyPolicy'> }, organisationId: string): Promise<KeyPolicy> {
  return (await stores.organisations.findKeyPolicy(organisationId)) ?? DEFAULT_KEY_POLICY;
}

function refuseEnvironment(policy: KeyPolicy, environment: KeyEnvironment): void {
  if (!policy.allowedEnvironments.includes(environment)) {
    throw new ValidationError([{ field: 'environment', issue: ISSUE_ENVIRONMENT_NOT_ALLOWED }]);
  }
}

/** A new key record and its raw key; only the digest is ever stored (C-30, C-31). */
function newKey(deps: Pick<CoreDeps, 'random'>, organisationId: string, spec: NewKeySpec, now: Date): IssuedKey {
  const rawKey = generateRawKey(spec.environment, deps.random);
  const key: ApiKey = {
    id: deps.random.uuid(),
    organisationId,
    label: spec.label,
    keyPrefix: keyPrefixOf(rawKey),
    digest: digestKey(rawKey),
    expiresAt: spec.expiresAt,
    createdAt: now,
    revokedAt: null,
    lastUsedAt: null,
    rolledFromKeyId: spec.rolledFromKeyId,
    scopes: spec.scopes,
    createdByKeyId: spec.createdByKeyId,
    metadata: spec.metadata,
    allowedCidrs: spec.allowedCidrs,
    rateLimitPerMinute: spec.rateLimitPerMinute,
  };
  return { key, rawKey };
}

export function maxActiveKeysMessage(max: number): string {
  return `The organisation already has the maximum number of active API keys (${max}); revoke one before issuing another`;
}

/** What issueKeyIn needs besides the checked body: who issues (an operator when omitted). */
export type IssueKeyRequest = Omit<IssueKeyInput, 'scopes' | 'expiresAtGiven'> & Partial<Pick<IssueKeyInput, 'scopes' | 'expiresAtGiven'>>;

/**
 * Issues a key through `stores` (call it inside a unit of work): the organisation must exist (404),
 * its key policy must allow the environment (400 `environment`) and the expiry (at most now + its
 * maximum lifetime, and never later than the issuing key's own expiry: 400 `expires_at`; omitted,
 * the earlier of the two), it must hold fewer than config.maxActiveKeysPerOrg active keys (C-25,
 * 409); the key and its api_key_issued entry are written together (C-41). Only the digest is stored
 * (C-31). Scopes omitted: the issuing key's own (the operator's: every built-in scope). Networks
 * (C-264): omitted, the issuing key's own; given, within them (403). A key limit (C-290) no higher
 * than the organisation's (400, C-291).
 */
export async function issueKeyIn(
  stores: OuterStores,
  deps: Pick<CoreDeps, 'random' | 'config'>,
  organisationId: string,
  input: IssueKeyRequest,
  actor: AuditActor,
  now: Date,
  principal: Principal = { kind: 'operator' },
): Promise<IssuedKey> {
  const organisation = await requireOrganisation(stores.organisations, organisationId);
  refusePlatformOnly(organisation, input.scopes ?? null);
  const policy = await keyPolicyIn(stores, organisationId);
  refuseEnvironment(policy, input.environment);
  const cap = await expiryCap(stores, principal, policy, now);
  let expiresAt = input.expiresAt;
  if (cap !== null) {
    if (input.expiresAtGiven === true && (expiresAt === null || expiresAt.getTime() > cap.at.getTime())) {
      throw new ValidationError([{ field: 'expires_at', issue: expiresAtCapIssue(cap) }]);
    }
    if (expiresAt === null) expiresAt = cap.at;
  }
  const max = deps.config.maxActiveKeysPerOrg;
  if ((await stores.apiKeys.countActive(organisationId, now)) >= max) throw new ConflictError(maxActiveKeysMessage(max));
  const scopes = input.scopes ?? inheritedScopes(organisation, principal);
  const createdByKeyId = principal.kind === 'api_key' ? principal.keyId : null;
  const allowedCidrs = await newKeyCidrs(stores, principal, input.allowedCidrs);
  const rateLimitPerMinute = input.rateLimitPerMinute ?? null;
  refuseKeyLimitAbove(organisation, rateLimitPerMinute, deps.config.rateLimitPerMinute);
  const metadata = input.metadata ?? {};
  const issued = newKey(deps, organisationId, { ...input, expiresAt, rolledFromKeyId: null, scopes, createdByKeyId, metadata, allowedCidrs, rateLimitPerMinute }, now);
  const { key } = issued;
  await stores.apiKeys.insert(key);
  const entry = {
    ...auditEntry(deps.random, 'api_key_issued', now, actor, organisationId, key),
    ...(allowedCidrs === null ? {} : { allowedCidrs }),
    ...(rateLimitPerMinute === null ? {} : { rateLimit: { old: null, new: rateLimitPerMinute } }),
  };
  await stores.audit.append(entry);
  await notifyKeyEvents(stores, deps.random, [{ type: 'api_key.issued', cause: causeOf(actor) }], now, key);
  return issued;
}

/** API key lifecycle: issue -> active -> revoked | expired (spec §3). */
export class ApiKeys {
  constructor(private readonly deps: CoreDeps) {}

  /**
   * GET .../api-keys, query {limit, cursor, expiring_within} (C-283: only keys active now that
   * expire within that duration); 404 when the organisation does not exist.
   */
  async list(principal: Principal, orgId: string, query: Readonly<Record<string, unknown>>): Promise<Page<ApiKey>> {
    authorise(principal, 'api_keys.list', orgId);
    const [id, q] = all(checkUuid(orgId, 'org_id'), checkKeyListQuery(query));
    await requireOrganisation(this.deps.stores.organisations, id);
    const now = this.deps.clock.now();
    const filter = q.expiringWithinSeconds === undefined ? {} : { expiring: { now, until: new Date(now.getTime() + q.expiringWithinSeconds * 1000) } };
    return paginate(q, (page) => this.deps.stores.apiKeys.list(id, page, filter), (k) => k);
  }

  /**
   * POST .../api-keys: body {label, expires_at?, environment?, scopes?} (C-23, C-60, C-62): scopes
   * the calling key does not hold are 403 before anything is read; at most
   * config.maxActiveKeysPerOrg active keys (C-25, 409); audit api_key_issued in the same unit of work.
   */
  async issue(principal: Principal, orgId: string, body: unknown): Promise<IssuedKey> {
    authorise(principal, 'api_keys.issue', orgId);
    const now = this.deps.clock.now();
    const [id, input] = all(checkUuid(orgId, 'org_id'), checkIssueKey(body, now, this.deps.scopes));
    if (input.scopes !== null) refuseEscalation(principal, input.scopes);
    return this.deps.unitOfWork.run((stores) => issueKeyIn(stores, this.deps, id, input, actorOf(principal), now, principal));
  }

  /**
   * POST .../api-keys/{key_id}/roll, body {grace_period_seconds?: 0..604800, label?, scopes?}:
   * the same authorisation as issuing a key. A new key of the same environment, label and scopes
   * (unless given; never scopes the calling key lacks: 403) and expires_at (capped by the key policy
   * and the calling key's expiry) replaces the old one, which stops at the earlier of its expiry and now
   * + grace (never later); grace 0 revokes it in the same unit of work (api_key_revoked). A revoked
   * or expired key, or one already rolled, is 409. C-25 counts only the new key: the old one, still
   * active until its grace ends, is not held against the cap. Audit api_key_rolled (old id, new id,
   * grace) and the `api_key.rolled` event commit with the change. Of concurrent rolls of one key
   * exactly one commits: the store lets only one key be rolled from any key.
   */
  async roll(principal: Principal, orgId: string, keyId: string, body: unknown): Promise<RolledKey> {
    authorise(principal, 'api_keys.issue', orgId);
    const [org, kid, input] = all(checkUuid(orgId, 'org_id'), checkUuid(keyId, 'key_id'), checkRollKey(body, this.deps.scopes));
    if (input.scopes !== null) refuseEscalation(principal, input.scopes);
    const now = this.deps.clock.now();
    return this.deps.unitOfWork.changeCredentials([org], async (stores) => {
      const old = await stores.apiKeys.findById(org, kid);
      if (old === null) throw new NotFoundError(KEY_NOT_FOUND_MESSAGE, { resource: 'api_key' });
      const scopes = input.scopes ?? scopesOf(old);
      refuseEscalation(principal, scopes);
      if (input.scopes?.some(isPlatformOnlyScope) === true) refusePlatformOnly(await requireOrganisation(stores.organisations, org), input.scopes);
      const policy = await keyPolicyIn(stores, org);
      const environment = keyEnvironmentOf(old);
      refuseEnvironment(policy, environment);
      if (keyStatus(old, now) !== 'active') throw rollRefusal(old, now);
      const max = this.deps.config.maxActiveKeysPerOrg;
      if ((await stores.apiKeys.countActive(org, now)) - 1 >= max) throw new ConflictError(maxActiveKeysMessage(max));
      const label = input.label ?? old.label;
      // The old key's expiry, capped by the policy's maximum lifetime and the rolling key's own expiry.
      const cap = await expiryCap(stores, principal, policy, now);
      const expiresAt = cap !== null && (old.expiresAt === null || old.expiresAt.getTime() > cap.at.getTime()) ? cap.at : old.expiresAt;
      const createdByKeyId = principal.kind === 'api_key' ? principal.keyId : null;
      // The new key keeps the old one's metadata, own limit (C-290) and networks, which must lie within the rolling key's (C-264).
      const allowedCidrs = allowedCidrsOf(old);
      refuseWiderCidrs(allowedCidrs, await callerCidrs(stores, principal));
      const spec = { label, environment, expiresAt, rolledFromKeyId: old.id, scopes, createdByKeyId, metadata: metadataOf(old), allowedCidrs, rateLimitPerMinute: keyRateLimitOf(old) };
      const rolled = newKey(this.deps, org, spec, now);
      // A second key rolled from `old` (a concurrent or earlier roll) fails here with 409.
      await stores.apiKeys.insert(rolled.key);
      const grace = input.gracePeriodSeconds;
      const end = new Date(now.getTime() + grace * 1000);
      const stopped =
        grace === 0
          ? await stores.apiKeys.revoke(org, old.id, now)
          : (old.expiresAt !== null && old.expiresAt.getTime() <= end.getTime()) || (await stores.apiKeys.shortenExpiry(org, old.id, end, now));
      if (!stopped) throw rollRefusal((await stores.apiKeys.findById(org, old.id)) ?? old, now);
      const actor = actorOf(principal);
      const roll = { toKeyId: rolled.key.id, gracePeriodSeconds: grace };
      await stores.audit.append({ ...auditEntry(this.deps.random, 'api_key_rolled', now, actor, org, old), roll });
      if (grace === 0) await stores.audit.append(auditEntry(this.deps.random, 'api_key_revoked', now, actor, org, old));
      // The roll is the caller's doing; the old key's revocation (grace 0) is the roll's.
      const rolledEvent: KeyEvent = { type: 'api_key.rolled', cause: causeOf(actor) };
      const events: KeyEvent[] = grace === 0 ? [rolledEvent, { type: 'api_key.revoked', cause: { type: 'roll', new_key_id: rolled.key.id } }] : [rolledEvent];
      await notifyKeyEvents(stores, this.deps.random, events, now, old, undefined, { ...roll, toKeyPrefix: rolled.key.keyPrefix });
      return rolled;
    });
  }

  /**
   * PATCH .../api-keys/{key_id} (C-261), body {label?, metadata?, allowed_cidrs?, rate_limit_per_minute?}: the same
   * authorisation as issuing a key; scopes, environment and expires_at are 400 (a different key is a
   * roll). Metadata is merged (null removes a name). A change of allowed_cidrs must hold at every
   * instance from the next request, and the cached credential carries the whole record: the unit of
   * work names the organisation's credentials as changed (the credential fence), for any change.
   */
  async update(principal: Principal, orgId: string, keyId: string, body: unknown): Promise<ApiKey> {
    authorise(principal, 'api_keys.update', orgId);
    const [org, kid, input] = all(checkUuid(orgId, 'org_id'), checkUuid(keyId, 'key_id'), checkPatchKey(body));
    const now = this.deps.clock.now();
    return this.deps.unitOfWork.changeCredentials([org], (stores) => updateKeyIn(stores, this.deps, org, kid, input, actorOf(principal), principal, now));
  }

  /**
   * GET /v1/me: the key that authenticated this request and its organisation. Any valid key may
   * ask (no scope, no organisation in the path); both records are read from the store, so the
   * answer is as fresh as a GET of each. A key revoked between its authentication and these reads
   * still gets its own record (it was valid when the request was admitted).
   */
  async whoAmI(principal: KeyPrincipal): Promise<WhoAmI> {
    const [key, organisation] = await Promise.all([
      this.deps.stores.apiKeys.findById(principal.organisationId, principal.keyId),
      this.deps.stores.organisations.findById(principal.organisationId),
    ]);
    if (key === null) throw new NotFoundError(KEY_NOT_FOUND_MESSAGE, { resource: 'api_key' });
    if (organisation === null) throw organisationNotFound();
    return { key, organisation };
  }

  /** GET .../api-keys/{key_id}: a key id not in the named organisation is 404 (C-34). */
  async get(principal: Principal, orgId: string, keyId: string): Promise<ApiKey> {
    authorise(principal, 'api_keys.get', orgId);
    const [org, kid] = all(checkUuid(orgId, 'org_id'), checkUuid(keyId, 'key_id'));
    const key = await this.deps.stores.apiKeys.findById(org, kid);
    if (key === null) throw new NotFoundError(KEY_NOT_FOUND_MESSAGE, { resource: 'api_key' });
    return key;
  }

  /**
   * DELETE .../api-keys/{key_id}: idempotent (C-35); the revocation, its api_key_revoked audit
   * entry (C-40) and its `api_key.revoked` webhook event (C-59) commit in one unit of work; a second
   * DELETE writes no second entry and no second event.
   */
  async revoke(principal: Principal, orgId: string, keyId: string): Promise<void> {
    authoriseRevocation(principal, orgId, keyId);
    const [org, kid] = all(checkUuid(orgId, 'org_id'), checkUuid(keyId, 'key_id'));
    await this.deps.unitOfWork.changeCredentials([org], async (stores) => {
      const key = await stores.apiKeys.findById(org, kid);
      if (key === null) throw new NotFoundError(KEY_NOT_FOUND_MESSAGE, { resource: 'api_key' });
      const now = this.deps.clock.now();
      if (await stores.apiKeys.revoke(org, kid, now)) {
        await stores.audit.append(auditEntry(this.deps.random, 'api_key_revoked', now, actorOf(principal), org, key));
        await notifyKeyEvents(stores, this.deps.random, [{ type: 'api_key.revoked', cause: causeOf(actorOf(principal)) }], now, key);
      }
    });
  }
}
