import type { ChainedAuditEntry } from '../domain/audit-chain.js';
import type { Principal } from '../domain/principal.js';
import { unwrap } from '../validation/issues.js';
import { checkAuditQuery } from '../validation/query.js';
import { authorise } from './authorise.js';
import type { CoreDeps } from './deps.js';
import type { Page } from './page.js';
import { paginate } from './paginate.js';

/** Reading the audit log (operator: `cos-admin audit list`). Query {org?, kind?, limit?, cursor?}. */
export class AuditTrail {
  constructor(private readonly deps: CoreDeps) {}

  async list(principal: Principal, query: Readonly<Record<string, unknown>>): Promise<Page<ChainedAuditEntry>> {
    authorise(principal, 'audit.list');
    const { organisationId, kind, ...page } = unwrap(checkAuditQuery(query));
    const filter = { ...(organisationId !== undefined ? { organisationId } : {}), ...(kind !== undefined ? { kind } : {}) };
    return paginate(page, (p) => this.deps.stores.audit.list(filter, p), (e) => ({ createdAt: e.occurredAt, id: e.id }));
  }
}
