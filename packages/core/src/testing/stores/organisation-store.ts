/** In memory: the organisations (OrganisationStore) and their key policies. */
import type { KeyPolicy } from '../../domain/key-policy.js';
import { uniqueConflict } from '../../domain/errors.js';
import type { Organisation } from '../../domain/organisation.js';
import type { OrganisationChanges, OrganisationStore } from '../../ports/organisation-store.js';
import type { PageRequest } from '../../ports/pagination.js';
import { copyDate, copyOrganisation, copyKeyPolicy, page, duplicateId } from '../in-memory-tables.js';
import type { Session } from '../in-memory-session.js';

export class InMemoryOrganisationStore implements OrganisationStore {
  constructor(private readonly session: Session) {}

  async create(organisation: Organisation): Promise<void> {
    const record = copyOrganisation(organisation);
    this.session.write((t) => {
      if (t.organisations.has(record.id)) throw duplicateId('Organisation');
      for (const o of t.organisations.values()) {
        if (o.slug === record.slug) {
          throw uniqueConflict('slug');
        }
      }
      t.organisations.set(record.id, record);
    });
  }

  async findById(id: string): Promise<Organisation | null> {
    return this.session.read((t) => {
      const o = t.organisations.get(id);
      return o === undefined ? null : copyOrganisation(o);
    });
  }

  async findFirstSystem(): Promise<Organisation | null> {
    return this.session.read((t) => {
      const [first] = page(
        [...t.organisations.values()].filter((o) => o.isSystem),
        (o) => o,
        { limit: 1, after: null },
        copyOrganisation,
      );
      return first ?? null;
    });
  }

  async update(id: string, changes: OrganisationChanges): Promise<Organisation | null> {
    const name = changes.name;
    const industrySection = changes.industrySection;
    const rateLimitPerMinute = changes.rateLimitPerMinute;
    const updatedAt = copyDate(changes.updatedAt);
    this.session.credentialWrite(id, 'organisations.update');
    return this.session.write((t) => {
      const current = t.organisations.get(id);
      if (current === undefined) return null;
      const next: Organisation = {
        ...current,
        ...(name !== undefined ? { name } : {}),
        ...(industrySection !== undefined ? { industrySection } : {}),
        ...(rateLimitPerMinute !== undefined ? { rateLimitPerMinute } : {}),
        updatedAt: copyDate(updatedAt),
      };
      t.organisations.set(id, next);
      return copyOrganisation(next);
    });
  }

  async list(request: PageRequest): Promise<Organisation[]> {
    return this.session.read((t) => page(t.organisations.values(), (o) => o, request, copyOrganisation));
  }

  async findKeyPolicy(organisationId: string): Promise<KeyPolicy | null> {
    return this.session.read((t) => {
      const p = t.keyPolicies.get(organisationId);
      return p === undefined ? null : copyKeyPolicy(p);
    });
  }

  async putKeyPolicy(organisationId: string, policy: KeyPolicy, _at: Date): Promise<void> {
    this.session.credentialWrite(organisationId, 'organisations.putKeyPolicy');
    const record = copyKeyPolicy(policy);
    this.session.write((t) => {
      if (!t.organisations.has(organisationId)) throw new Error('key policy for an organisation that does not exist');
      t.keyPolicies.set(organisationId, record);
    });
  }
}
