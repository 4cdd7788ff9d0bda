import type { KeyPolicy } from '../domain/key-policy.js';
import type { NaceSection, Organisation } from '../domain/organisation.js';
import type { PageRequest } from './pagination.js';

export interface OrganisationChanges {
  readonly name?: string;
  readonly industrySection?: NaceSection | null;
  readonly rateLimitPerMinute?: number | null;
  readonly updatedAt: Date;
}

export interface OrganisationStore {
  /** Inserts; a duplicate slug throws ConflictError with details [{field:'slug', issue:'already taken'}]. */
  create(organisation: Organisation): Promise<void>;
  findById(id: string): Promise<Organisation | null>;
  /** The oldest organisation with isSystem true, if any (bootstrap). */
  findFirstSystem(): Promise<Organisation | null>;
  /** Applies the changes; returns the updated record, or null when no such organisation. */
  update(id: string, changes: OrganisationChanges): Promise<Organisation | null>;
  /** Records ordered by (createdAt, id) ascending, strictly after `page.after`, at most `page.limit`. */
  list(page: PageRequest): Promise<Organisation[]>;
  /** The organisation's key policy (C-62), or null when it never set one (the default applies). */
  findKeyPolicy(organisationId: string): Promise<KeyPolicy | null>;
  /** Sets (replaces) the organisation's key policy. */
  putKeyPolicy(organisationId: string, policy: KeyPolicy, at: Date): Promise<void>;
}
