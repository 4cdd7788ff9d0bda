import type { AuditEntry } from '../domain/audit.js';
import type { Principal } from '../domain/principal.js';
import type { CoreDeps } from './deps.js';
import type { Page } from './page.js';

/** Reading the audit log (operator: `cos-admin audit list`). Query {org?, kind?, limit?, cursor?}. */
export class AuditTrail {
  constructor(private readonly deps: CoreDeps) {}

  list(principal: Principal, query: Readonly<Record<string, unknown>>): Promise<Page<AuditEntry>> {
    throw new Error('TODO: implement');
  }
}
