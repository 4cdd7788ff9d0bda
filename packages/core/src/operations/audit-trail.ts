import type { ChainedAuditEntry } from '../domain/audit-chain.js';
import { encodeSeqCursor } from '../validation/cursor.js';
import { checkUuid } from '../validation/ids.js';
import { all } from '../validation/issues.js';
import { checkAuditEventsQuery } from '../validation/query.js';
import type { Principal } from '../domain/principal.js';
import { unwrap } from '../validation/issues.js';
import { checkAuditQuery } from '../validation/query.js';
import { authorise } from '../access/authorise.js';
import type { CoreDeps } from '../deps.js';
import type { Page } from './page.js';
import { paginate } from './paginate.js';
import { requireOrganisation } from './require-organisation.js';

/**
 * Reading the audit log: the operator's `cos-admin audit list` (query {org?, kind?, limit?, cursor?}),
 * and an organisation's own trail over HTTP (C-63).
 */
export class AuditTrail {
  constructor(private readonly deps: CoreDeps) {}

  async list(principal: Principal, query: Readonly<Record<string, unknown>>): Promise<Page<ChainedAuditEntry>> {
    authorise(principal, 'audit.list');
    const { organisationId, kind, ...page } = unwrap(checkAuditQuery(query));
    const filter = { ...(organisationId !== undefined ? { organisationId } : {}), ...(kind !== undefined ? { kind } : {}) };
    return paginate(page, (p) => this.deps.stores.audit.list(filter, p), (e) => ({ createdAt: e.occurredAt, id: e.id }));
  }

  /**
   * GET /organisations/{org_id}/audit-events: the organisation's chain in seq order (own organisation
   * or a platform key, C-34), query {limit?, cursor?, kind?, since?, until?}; 404 when the
   * organisation does not exist. The cursor is the last seq of the page (C-6: entries appended
   * meanwhile come after it, so paging visits every entry once).
   */
  async events(principal: Principal, orgId: string, query: Readonly<Record<string, unknown>>): Promise<Page<ChainedAuditEntry>> {
    authorise(principal, 'audit_events.list', orgId);
    const [id, q] = all(checkUuid(orgId, 'org_id'), checkAuditEventsQuery(query));
    await requireOrganisation(this.deps.stores.organisations, id);
    const rows = await this.deps.stores.audit.chain(id, {
      afterSeq: q.afterSeq,
      limit: q.limit + 1,
      ...(q.kind !== undefined ? { kind: q.kind } : {}),
      ...(q.since !== undefined ? { since: q.since } : {}),
      ...(q.until !== undefined ? { until: q.until } : {}),
    });
    const items = rows.slice(0, q.limit);
    const last = items[items.length - 1];
    return { items, nextCursor: rows.length > q.limit && last !== undefined ? encodeSeqCursor(last.seq) : null };
  }
}
