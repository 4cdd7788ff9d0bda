/** In memory: Members (MemberStore). */
import { uniqueConflict } from '../../domain/errors.js';
import type { Member } from '../../domain/member.js';
import type { MemberStore } from '../../ports/member-store.js';
import type { PageRequest } from '../../ports/pagination.js';
import { copyDate, page, duplicateId } from '../in-memory-tables.js';
import type { Session } from '../in-memory-session.js';

function copyMember(m: Member): Member {
  return { id: m.id, organisationId: m.organisationId, email: m.email, createdAt: copyDate(m.createdAt) };
}

export class InMemoryMemberStore implements MemberStore {
  constructor(private readonly session: Session) {}

  async add(member: Member): Promise<void> {
    const record = copyMember(member);
    const email = record.email.toLowerCase();
    this.session.write((t) => {
      if (t.members.has(record.id)) throw duplicateId('Member');
      for (const m of t.members.values()) {
        if (m.organisationId === record.organisationId && m.email.toLowerCase() === email) {
          throw uniqueConflict('email');
        }
      }
      t.members.set(record.id, record);
    });
  }

  async find(organisationId: string, memberId: string): Promise<Member | null> {
    return this.session.read((t) => {
      const m = t.members.get(memberId);
      return m === undefined || m.organisationId !== organisationId ? null : copyMember(m);
    });
  }

  async remove(organisationId: string, memberId: string): Promise<boolean> {
    return this.session.write((t) => {
      const m = t.members.get(memberId);
      if (m === undefined || m.organisationId !== organisationId) return false;
      t.members.delete(memberId);
      return true;
    });
  }

  async list(organisationId: string, request: PageRequest): Promise<Member[]> {
    return this.session.read((t) =>
      page(
        [...t.members.values()].filter((m) => m.organisationId === organisationId),
        (m) => m,
        request,
        copyMember,
      ),
    );
  }
}
