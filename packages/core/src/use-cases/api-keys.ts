import {
  digestKey,
  generateRawKey,
  keyPrefixOf,
  type ApiKey,
} from '../domain/api-key.js';
import type { AuditActor } from '../domain/audit.js';
import { ConflictError, NotFoundError } from '../domain/errors.js';
import type { Principal } from '../domain/principal.js';
import type { Stores } from '../ports/unit-of-work.js';
import type { IssueKeyInput } from '../validation/api-key.js';
import { checkIssueKey } from '../validation/api-key.js';
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

export const KEY_NOT_FOUND_MESSAGE = 'API key not found';

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
  const rawKey = generateRawKey(input.environment, deps.random);
  const key: ApiKey = {
    id: deps.random.uuid(),
    organisationId,
    label: input.label,
    keyPrefix: keyPrefixOf(rawKey),
    digest: digestKey(rawKey),
    expiresAt: input.expiresAt,
    createdAt: now,
    revokedAt: null,
  };
  await stores.apiKeys.insert(key);
  await stores.audit.append(auditEntry(deps.random, 'api_key_issued', now, actor, organisationId, key));
  await notifyKeyEvents(stores, deps.random, ['api_key.issued'], now, key);
  return { key, rawKey };
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
    });
  }
}
