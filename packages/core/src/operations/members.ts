import { NotFoundError } from '../domain/errors.js';
import type { Member } from '../domain/member.js';
import type { Principal } from '../domain/principal.js';
import { checkUuid } from '../validation/ids.js';
import { all } from '../validation/issues.js';
import { checkAddMember } from '../validation/member.js';
import { checkListQuery } from '../validation/query.js';
import { auditEntry } from './audit-entry.js';
import { actorOf, authorise } from '../access/authorise.js';
import type { CoreDeps } from '../deps.js';
import type { Page } from './page.js';
import { paginate } from './paginate.js';
import { requireOrganisation } from './require-organisation.js';

const MEMBER_NOT_FOUND_MESSAGE = 'Member not found';

/** Member operations: list over HTTP (own organisation or platform); add/remove for the operator (C-21). */
export class Members {
  constructor(private readonly deps: CoreDeps) {}

  /** GET /organisations/{org_id}/members, query {limit, cursor}; 404 when the organisation does not exist. */
  async list(principal: Principal, orgId: string, query: Readonly<Record<string, unknown>>): Promise<Page<Member>> {
    authorise(principal, 'members.list', orgId);
    const [id, q] = all(checkUuid(orgId, 'org_id'), checkListQuery(query));
    await requireOrganisation(this.deps.stores.organisations, id);
    return paginate(q, (page) => this.deps.stores.members.list(id, page), (m) => m);
  }

  /** Operator: body {email}; 404 unknown organisation; 409 duplicate e-mail in the organisation. */
  async add(principal: Principal, orgId: string, body: unknown): Promise<Member> {
    authorise(principal, 'members.add');
    const [id, input] = all(checkUuid(orgId, 'org_id'), checkAddMember(body));
    const now = this.deps.clock.now();
    return this.deps.unitOfWork.run(async (stores) => {
      await requireOrganisation(stores.organisations, id);
      const member: Member = { id: this.deps.random.uuid(), organisationId: id, email: input.email, createdAt: now };
      await stores.members.add(member);
      await stores.audit.append(auditEntry(this.deps.random, 'member_added', now, actorOf(principal), id, null, member));
      return member;
    });
  }

  /** Operator: 404 when the member is not in that organisation; a `member_removed` entry in the same unit of work. */
  async remove(principal: Principal, orgId: string, memberId: string): Promise<void> {
    authorise(principal, 'members.remove');
    const [org, id] = all(checkUuid(orgId, 'org_id'), checkUuid(memberId, 'member_id'));
    const now = this.deps.clock.now();
    await this.deps.unitOfWork.run(async (stores) => {
      const member = await stores.members.find(org, id);
      if (member === null || !(await stores.members.remove(org, id))) throw new NotFoundError(MEMBER_NOT_FOUND_MESSAGE, { resource: 'member' });
      await stores.audit.append(auditEntry(this.deps.random, 'member_removed', now, actorOf(principal), org, null, member));
    });
  }
}
