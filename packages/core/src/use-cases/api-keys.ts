import { changesCredentialsOf } from '../credential-change.js';
import {
  digestKey,
  generateRawKey,
  keyEnvironmentOf,
  keyPrefixOf,
  keyStatus,
  KEY_ALREADY_ROLLED_MESSAGE,
  type ApiKey,
  type KeyEnvironment,
} from '../domain/api-key.js';
import type { AuditActor } from '../domain/audit.js';
import { ConflictError, NotFoundError } from '../domain/errors.js';
import type { Principal } from '../domain/principal.js';
import type { Stores } from '../ports/unit-of-work.js';
import type { IssueKeyInput } from '../validation/api-key.js';
import { checkIssueKey, checkRollKey } from '../validation/api-key.js';
import { checkUuid } from '../validation/ids.js';
import { all } from '../validation/issues.js';
import { checkListQuery } from '../validation/query.js';
import { auditEntry } from './audit-entry.js';
import { notifyKeyEvents } from './key-events.js';
import { actorOf, authorise } from './authorise.js';
import type { CoreDeps } from './deps.js';
import type { Page } from './page.js';
import { paginate } from './paginate.js';
import { ORGANISATION_NOT_FOUND_MESSAGE } from './organisations.js';

/** The issuance result: the only place the raw key ever appears (spec §5.6, C-22). */
export interface IssuedKey {
  readonly key: ApiKey;
  readonly rawKey: string;
}

/** A roll's result: the new key (its rolledFromKeyId names the old one) and its raw key, shown once. */
export type RolledKey = IssuedKey;

export const KEY_NOT_FOUND_MESSAGE = 'API key not found';
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
  };
  return { key, rawKey };
}

export function maxActiveKeysMessage(max: number): string {
  return `The organisation already has the maximum number of active API keys (${max}); revoke one before issuing another`;
}

/**
 * Issues a key through `stores` (call it inside a unit of work): the organisation must exist (404),
 * hold fewer than config.maxActiveKeysPerOrg active keys (C-25, 409); the key and its
 * api_key_issued entry are written together (C-41). Only the digest is stored (C-31).
 */
export async function issueKeyIn(
  stores: Stores,
  deps: Pick<CoreDeps, 'random' | 'config'>,
  organisationId: string,
  input: IssueKeyInput,
  actor: AuditActor,
  now: Date,
): Promise<IssuedKey> {
  const organisation = await stores.organisations.findById(organisationId);
  if (organisation === null) throw new NotFoundError(ORGANISATION_NOT_FOUND_MESSAGE);
  const max = deps.config.maxActiveKeysPerOrg;
  if ((await stores.apiKeys.countActive(organisationId, now)) >= max) throw new ConflictError(maxActiveKeysMessage(max));
  const issued = newKey(deps, organisationId, { ...input, rolledFromKeyId: null }, now);
  const { key } = issued;
  await stores.apiKeys.insert(key);
  await stores.audit.append(auditEntry(deps.random, 'api_key_issued', now, actor, organisationId, key));
  await notifyKeyEvents(stores, deps.random, ['api_key.issued'], now, key);
  return issued;
}

/** API key lifecycle: issue -> active -> revoked | expired (spec §3). */
export class ApiKeys {
  constructor(private readonly deps: CoreDeps) {}

  /** GET .../api-keys, query {limit, cursor}; 404 when the organisation does not exist. */
  async list(principal: Principal, orgId: string, query: Readonly<Record<string, unknown>>): Promise<Page<ApiKey>> {
    authorise(principal, 'api_keys.list', orgId);
    const [id, q] = all(checkUuid(orgId, 'org_id'), checkListQuery(query));
    if ((await this.deps.stores.organisations.findById(id)) === null) {
      throw new NotFoundError(ORGANISATION_NOT_FOUND_MESSAGE);
    }
    return paginate(q, (page) => this.deps.stores.apiKeys.list(id, page), (k) => k);
  }

  /**
   * POST .../api-keys: body {label, expires_at?, environment?} (C-23); at most
   * config.maxActiveKeysPerOrg active keys (C-25, 409); audit api_key_issued in the same unit of work.
   */
  async issue(principal: Principal, orgId: string, body: unknown): Promise<IssuedKey> {
    authorise(principal, 'api_keys.issue', orgId);
    const now = this.deps.clock.now();
    const [id, input] = all(checkUuid(orgId, 'org_id'), checkIssueKey(body, now));
    return this.deps.unitOfWork.run((stores) => issueKeyIn(stores, this.deps, id, input, actorOf(principal), now));
  }

  /**
   * POST .../api-keys/{key_id}/roll (issue 16), body {grace_period_seconds?: 0..604800, label?}:
   * the same authorisation as issuing a key. A new key of the same environment, label (unless one
   * is given) and expires_at replaces the old one, which stops at the earlier of its expiry and now
   * + grace (never later); grace 0 revokes it in the same unit of work (api_key_revoked). A revoked
   * or expired key, or one already rolled, is 409. C-25 counts only the new key: the old one, still
   * active until its grace ends, is not held against the cap. Audit api_key_rolled (old id, new id,
   * grace) and the `api_key.rolled` event commit with the change. Of concurrent rolls of one key
   * exactly one commits: the store lets only one key be rolled from any key.
   */
  async roll(principal: Principal, orgId: string, keyId: string, body: unknown): Promise<RolledKey> {
    authorise(principal, 'api_keys.issue', orgId);
    const [org, kid, input] = all(checkUuid(orgId, 'org_id'), checkUuid(keyId, 'key_id'), checkRollKey(body));
    const now = this.deps.clock.now();
    return this.deps.unitOfWork.run(async (stores) => {
      const old = await stores.apiKeys.findById(org, kid);
      if (old === null) throw new NotFoundError(KEY_NOT_FOUND_MESSAGE);
      if (keyStatus(old, now) !== 'active') throw rollRefusal(old, now);
      const max = this.deps.config.maxActiveKeysPerOrg;
      if ((await stores.apiKeys.countActive(org, now)) - 1 >= max) throw new ConflictError(maxActiveKeysMessage(max));
      const label = input.label ?? old.label;
      const rolled = newKey(this.deps, org, { label, environment: keyEnvironmentOf(old), expiresAt: old.expiresAt, rolledFromKeyId: old.id }, now);
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
      const events = grace === 0 ? (['api_key.rolled', 'api_key.revoked'] as const) : (['api_key.rolled'] as const);
      await notifyKeyEvents(stores, this.deps.random, events, now, old, undefined, { ...roll, toKeyPrefix: rolled.key.keyPrefix });
      return rolled;
    }, changesCredentialsOf(org));
  }

  /** GET .../api-keys/{key_id}: a key id not in the named organisation is 404 (C-34). */
  async get(principal: Principal, orgId: string, keyId: string): Promise<ApiKey> {
    authorise(principal, 'api_keys.get', orgId);
    const [org, kid] = all(checkUuid(orgId, 'org_id'), checkUuid(keyId, 'key_id'));
    const key = await this.deps.stores.apiKeys.findById(org, kid);
    if (key === null) throw new NotFoundError(KEY_NOT_FOUND_MESSAGE);
    return key;
  }

  /**
   * DELETE .../api-keys/{key_id}: idempotent (C-35); the revocation, its api_key_revoked audit
   * entry (C-40) and its `api_key.revoked` webhook event (C-59) commit in one unit of work; a second
   * DELETE writes no second entry and no second event.
   */
  async revoke(principal: Principal, orgId: string, keyId: string): Promise<void> {
    authorise(principal, 'api_keys.revoke', orgId);
    const [org, kid] = all(checkUuid(orgId, 'org_id'), checkUuid(keyId, 'key_id'));
    await this.deps.unitOfWork.run(async (stores) => {
      const key = await stores.apiKeys.findById(org, kid);
      if (key === null) throw new NotFoundError(KEY_NOT_FOUND_MESSAGE);
      const now = this.deps.clock.now();
      if (await stores.apiKeys.revoke(org, kid, now)) {
        await stores.audit.append(auditEntry(this.deps.random, 'api_key_revoked', now, actorOf(principal), org, key));
        await notifyKeyEvents(stores, this.deps.random, ['api_key.revoked'], now, key);
      }
    }, changesCredentialsOf(org));
  }
}
