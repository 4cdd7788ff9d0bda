/**
 * Operator audit (C-58): the operator's name as the actor of an entry (`--actor`, default
 * the OS user name), and the member of `member_added` / `member_removed` entries. Only ADD COLUMN
 * (nullable): older entries keep no name and no member; `kind` has no CHECK, and the actor_type
 * CHECK of 0002 already admits 'operator'. One column per statement, as SQLite requires.
 */
import { idType, type SqlMigration } from './migration.js';

export const operatorAudit: SqlMigration = {
  name: '0004_operator_audit',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      'ALTER TABLE audit_entries ADD COLUMN actor_name text NULL',
      `ALTER TABLE audit_entries ADD COLUMN member_id ${ID} NULL`,
      'ALTER TABLE audit_entries ADD COLUMN member_email text NULL',
    ];
  },
};
