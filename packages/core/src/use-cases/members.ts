import type { Member } from '../domain/member.js';
import type { Principal } from '../domain/principal.js';
import type { CoreDeps } from './deps.js';
import type { Page } from './page.js';

/** Member operations: list over HTTP (own organisation or platform); add/remove for the operator (C-21). */
export class Members {
  constructor(private readonly deps: CoreDeps) {}

  /** GET /organisations/{org_id}/members, query {limit, cursor}; 404 when the organisation does not exist. */
  list(principal: Principal, orgId: string, query: Readonly<Record<string, unknown>>): Promise<Page<Member>> {
    throw new Error('TODO: implement');
  }

  /** Operator: body {email}; 404 unknown organisation; 409 duplicate e-mail in the organisation. */
  add(principal: Principal, orgId: string, body: unknown): Promise<Member> {
    throw new Error('TODO: implement');
  }

  /** Operator: 404 when the member is not in that organisation. */
  remove(principal: Principal, orgId: string, memberId: string): Promise<void> {
    throw new Error('TODO: implement');
  }
}
