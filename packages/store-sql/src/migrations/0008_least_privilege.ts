/**
 * Least privilege (C-60..C-62): a key's scopes (its sorted names joined by single spaces; keys that
 * exist get every built-in scope, so they answer as before, C-56), the key that issued or rolled it
 * (null: an operator, and every key made before), with an index for the lineage walk; what an
 * exposure entry lists (descendant key ids, space-joined) and what a policy entry records (the old
 * and new policy as JSON); and one row per organisation that set a key policy. ADD COLUMN and
 * CREATE only; the scopes default is a constant, so no row is rewritten on Postgres.
 */
import { idType, type SqlMigration } from './migration.js';

export const leastPrivilege: SqlMigration = {
  name: '0008_least_privilege',
  statements(dialect) {
    const ID = idType(dialect);
    const all = 'api_keys:read api_keys:write audit:read members:read organisations:read organisations:write webhooks:read webhooks:write';
    return [
      `ALTER TABLE api_keys ADD COLUMN scopes text NOT NULL DEFAULT '${all}'`,
      `ALTER TABLE api_keys ADD COLUMN created_by_key_id ${ID} NULL`,
      'CREATE INDEX api_keys_created_by_created_at_id ON api_keys (created_by_key_id, created_at, id)',
      'ALTER TABLE audit_entries ADD COLUMN descendant_key_ids text NULL',
      'ALTER TABLE audit_entries ADD COLUMN key_policy text NULL',
      `CREATE TABLE organisation_key_policies (
        organisation_id ${ID} PRIMARY KEY REFERENCES organisations (id),
        max_lifetime_seconds integer NULL,
        allowed_environments text NOT NULL,
        exposure_response text NOT NULL CHECK (exposure_response IN ('revoke_key', 'revoke_key_and_descendants')),
        updated_at bigint NOT NULL
      )`,
    ];
  },
};
