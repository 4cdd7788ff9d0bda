/**
 * Organisations' own rate limits, their plans (C-240..C-242). GET: the organisation's own key with
 * organisations:read, or a platform key. PUT: a platform key with organisations:write, or the
 * operator; an organisation does not choose its own plan. The limit is part of the organisation
 * record read with every credential, so a change is a credential change of the organisation:
 * declared to the credential fence, it applies on the next request at every instance.
 */
import { organisationNotFound } from '../domain/errors.js';
import type { Organisation } from '../domain/organisation.js';
import type { Principal } from '../domain/principal.js';
import { checkUuid } from '../validation/ids.js';
import { all, unwrap } from '../validation/issues.js';
import { checkRateLimit } from '../validation/rate-limit.js';
import { auditEntry } from './audit-entry.js';
import { actorOf, authorise } from '../access/authorise.js';
import type { CoreDeps } from '../deps.js';
import { requireOrganisation } from './require-organisation.js';

/** The limit in force for an organisation: its own, or the default when it has none. */
export interface OrganisationRateLimit {
  readonly requestsPerMinute: number;
  readonly source: 'organisation' | 'default';
}

/** The limit `organisation` is counted against, with `defaultPerMinute` (RATE_LIMIT_PER_MINUTE) for none of its own. */
export function rateLimitOf(organisation: Pick<Organisation, 'rateLimitPerMinute'>, defaultPerMinute: number): OrganisationRateLimit {
  return organisation.rateLimitPerMinute === null
    ? { requestsPerMinute: defaultPerMinute, source: 'default' }
    : { requestsPerMinute: organisation.rateLimitPerMinute, source: 'organisation' };
}

export class RateLimits {
  constructor(private readonly deps: CoreDeps) {}

  /** GET /v1/organisations/{org_id}/rate-limit; 404 for an organisation that does not exist. */
  async get(principal: Principal, orgId: string): Promise<OrganisationRateLimit> {
    authorise(principal, 'organisations.rate_limit.get', orgId);
    const id = unwrap(checkUuid(orgId, 'org_id'));
    const organisation = await requireOrganisation(this.deps.stores.organisations, id);
    return rateLimitOf(organisation, this.deps.config.rateLimitPerMinute);
  }

  /**
   * PUT /v1/organisations/{org_id}/rate-limit: body {requests_per_minute: 1..1,000,000 | null}.
   * The change and its `organisation_rate_limit_changed` entry (old and new value) commit together;
   * the value the organisation already has changes nothing and writes no entry.
   */
  async replace(principal: Principal, orgId: string, body: unknown): Promise<OrganisationRateLimit> {
    authorise(principal, 'organisations.rate_limit.replace');
    const [id, requested] = all(checkUuid(orgId, 'org_id'), checkRateLimit(body));
    const organisation = await this.deps.unitOfWork.changeCredentials([id], async (stores) => {
      const current = await requireOrganisation(stores.organisations, id);
      if (current.rateLimitPerMinute === requested) return current;
      const now = this.deps.clock.now();
      const updated = await stores.organisations.update(id, { rateLimitPerMinute: requested, updatedAt: now });
      if (updated === null) throw organisationNotFound();
      await stores.audit.append({
        ...auditEntry(this.deps.random, 'organisation_rate_limit_changed', now, actorOf(principal), id),
        rateLimit: { old: current.rateLimitPerMinute, new: requested },
      });
      return updated;
    });
    return rateLimitOf(organisation, this.deps.config.rateLimitPerMinute);
  }
}
