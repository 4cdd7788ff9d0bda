import type { Member } from '../domain/member.js';
import type { PageRequest } from './pagination.js';

export interface MemberStore {
  /** Inserts; the same e-mail (case-insensitive) twice in one organisation throws ConflictError (field 'email'). */
  add(member: Member): Promise<void>;
  /** The member with that id in that organisation, or null. */
  find(organisationId: string, memberId: string): Promise<Member | null>;
  /** Returns false when the member does not exist in that organisation. */
  remove(organisationId: string, memberId: string): Promise<boolean>;
  /** Members of one organisation ordered by (createdAt, id), strictly after `page.after`, at most `page.limit`. */
  list(organisationId: string, page: PageRequest): Promise<Member[]>;
}
