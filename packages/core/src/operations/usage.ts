import { KEY_NOT_FOUND_MESSAGE } from './api-keys.js';
import { NotFoundError } from '../domain/errors.js';
import type { Principal } from '../domain/principal.js';
import type { UsageBucket } from '../ports/usage-store.js';
import { authorise } from '../access/authorise.js';
import type { CoreDeps } from '../deps.js';
import { checkUuid } from '../validation/ids.js';
import { all } from '../validation/issues.js';
import { checkUsageQuery } from '../validation/usage.js';
import { requireOrganisation } from './require-organisation.js';

/**
 * Usage counts (requests answered, requests refused with 429) per hour or UTC day: of one key, or
 * summed over an organisation's keys. Readers of key records may read them (own organisation with
 * `api_keys:read`, or a platform key): the key's (`api_keys.get`) or the organisation's
 * (`api_keys.list`). Buckets with traffic only, oldest first. What the store holds lags the requests
 * by up to KEY_USAGE_FLUSH_MS (each instance adds its counts at its flush).
 */
export class Usage {
  constructor(private readonly deps: CoreDeps) {}

  /** GET /organisations/{org_id}/api-keys/{key_id}/usage: 404 for a key not in that organisation. */
  async ofKey(principal: Principal, orgId: string, keyId: string, query: Readonly<Record<string, unknown>>): Promise<UsageBucket[]> {
    authorise(principal, 'api_keys.get', orgId);
    const [org, kid, range] = all(checkUuid(orgId, 'org_id'), checkUuid(keyId, 'key_id'), checkUsageQuery(query, this.deps.clock.now()));
    const key = await this.deps.stores.apiKeys.findById(org, kid);
    if (key === null) throw new NotFoundError(KEY_NOT_FOUND_MESSAGE, { resource: 'api_key' });
    return this.deps.stores.usage.forKey(org, kid, range);
  }

  /** GET /organisations/{org_id}/usage: 404 for an organisation that does not exist. */
  async ofOrganisation(principal: Principal, orgId: string, query: Readonly<Record<string, unknown>>): Promise<UsageBucket[]> {
    authorise(principal, 'api_keys.list', orgId);
    const [org, range] = all(checkUuid(orgId, 'org_id'), checkUsageQuery(query, this.deps.clock.now()));
    await requireOrganisation(this.deps.stores.organisations, org);
    return this.deps.stores.usage.forOrganisation(org, range);
  }
}
