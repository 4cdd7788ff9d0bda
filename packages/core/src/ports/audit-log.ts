import type { AuditEntry, AuditKind } from '../domain/audit.js';
import type { PageRequest } from './pagination.js';

export interface AuditFilter {
  readonly organisationId?: string;
  readonly kind?: AuditKind;
}

/** Append-only (C-41): there is no update or delete. */
export interface AuditLog {
  append(entry: AuditEntry): Promise<void>;
  /** Entries ordered by (occurredAt, id) ascending, strictly after `page.after`, at most `page.limit`. */
  list(filter: AuditFilter, page: PageRequest): Promise<AuditEntry[]>;
}
