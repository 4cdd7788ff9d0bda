/**
 * The kind index made partial: (kind, occurred_at, id) without the two kinds every issuance and
 * revocation writes (stores/audit-log.ts FREQUENT_AUDIT_KINDS), so those commits write one b-tree
 * fewer. Listings by a rare kind across organisations range-scan the new index (their statement
 * carries its predicate); by a frequent kind they walk (occurred_at, id); with an organisation,
 * (organisation_id, occurred_at, id) as before.
 */
import { RARE_KIND_INDEX, RARE_KIND_PREDICATE } from '../stores/audit-log.js';
import type { SqlMigration } from './migration.js';

export const rareKindIndex: SqlMigration = {
  name: '0012_audit_rare_kind_index',
  statements() {
    return [
      'DROP INDEX audit_entries_kind_occurred_at_id',
      `CREATE INDEX ${RARE_KIND_INDEX} ON audit_entries (kind, occurred_at, id) WHERE ${RARE_KIND_PREDICATE}`,
    ];
  },
};
