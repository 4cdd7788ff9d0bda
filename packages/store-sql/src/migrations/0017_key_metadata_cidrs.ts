/**
 * Key metadata and network restrictions (C-260, C-262): `api_keys.metadata` (a JSON object with its
 * names sorted; a constant default of `{}`, so no row is rewritten on Postgres), nullable
 * `api_keys.allowed_cidrs` (a JSON array of canonical CIDRs; NULL: any address), and on
 * `audit_entries` nullable `changed_fields` (space-joined field names, `api_key_updated`) and
 * `allowed_cidrs` (JSON: the array, or `null` when a change lifted the restriction). ADD COLUMN only.
 */
import type { SqlMigration } from './migration.js';

export const keyMetadataCidrs: SqlMigration = {
  name: '0017_key_metadata_cidrs',
  statements() {
    return [
      "ALTER TABLE api_keys ADD COLUMN metadata text NOT NULL DEFAULT '{}'",
      'ALTER TABLE api_keys ADD COLUMN allowed_cidrs text NULL',
      'ALTER TABLE audit_entries ADD COLUMN changed_fields text NULL',
      'ALTER TABLE audit_entries ADD COLUMN allowed_cidrs text NULL',
    ];
  },
};
