/**
 * Organisations' key policies (C-62). GET: the organisation's own key with organisations:read, or a
 * platform key. PUT: a platform key with organisations:write, or the operator; the whole policy is
 * replaced and an `organisation_policy_updated` audit entry (old and new policy) is written in the
 * same unit of work. A policy applies when a key is issued or rolled; existing keys are unchanged.
 */
import { keyStatus, keyEnvironmentOf, type ApiKey } from '../domain/api-key.js';
import type { KeyPolicy } from '../domain/key-policy.js';
import type { Principal } from '../domain/principal.js';
import { checkUuid } from '../validation/ids.js';
import { all, unwrap } from '../validation/issues.js';
import { checkKeyPolicy } from '../validation/key-policy.js';
import { keyPolicyIn } from './api-keys.js';
import { auditEntry } from './audit-entry.js';
import { actorOf, authorise } from '../access/authorise.js';
import type { CoreDeps } from '../deps.js';
import { requireOrganisation } from './require-organisation.js';

export class KeyPolicies {
  constructor(private readonly deps: CoreDeps) {}

  /** GET /v1/organisations/{org_id}/key-policy: the default for an organisation that never set one; 404 for none. */
  async get(principal: Principal, orgId: string): Promise<KeyPolicy> {
    authorise(principal, 'organisations.key_policy.get', orgId);
    const id = unwrap(checkUuid(orgId, 'org_id'));
    // Two plain reads: no transaction (on SQLite one would take the write lock).
    const { stores } = this.deps;
    await requireOrganisation(stores.organisations, id);
    return keyPolicyIn(stores, id);
  }

  /** PUT /v1/organisations/{org_id}/key-policy: body {max_lifetime_seconds, allowed_environments, exposure_response}. */
  async replace(principal: Principal, orgId: string, body: unknown): Promise<KeyPolicy> {
    authorise(principal, 'organisations.key_policy.replace');
    const [id, policy] = all(checkUuid(orgId, 'org_id'), checkKeyPolicy(body));
    return this.deps.unitOfWork.changeCredentials([id], async (stores) => {
      await requireOrganisation(stores.organisations, id);
      const old = await keyPolicyIn(stores, id);
      const now = this.deps.clock.now();
      await stores.organisations.putKeyPolicy(id, policy, now);
      await stores.audit.append({ ...auditEntry(this.deps.random, 'organisation_policy_updated', now, actorOf(principal), id), keyPolicy: { old, new: policy } });
      return policy;
    });
  }
}

/**
 * True when `key` is active and could not be issued today under `policy` (`cos-admin key list
 * --exceeding-policy`): its environment is not allowed, or its expiry lies further from now than
 * the maximum lifetime allows (no expiry counts as further).
 */
export function exceedsPolicy(key: ApiKey, policy: KeyPolicy, now: Date): boolean {
  if (keyStatus(key, now) !== 'active') return false;
  if (!policy.allowedEnvironments.includes(keyEnvironmentOf(key))) return true;
  if (policy.maxLifetimeSeconds === null) return false;
  return key.expiresAt === null || key.expiresAt.getTime() - now.getTime() > policy.maxLifetimeSeconds * 1000;
}
