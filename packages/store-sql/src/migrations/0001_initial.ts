/** The first schema: organisations, their members and API keys, and the audit log. */
import { idType, type SqlMigration } from './migration.js';
import type { SqlDialect } from '../database-url.js';

/** A raw key (57 characters, with '_') can never fit: only a lower-case hex SHA-256 does (C-31). */
function digestCheck(dialect: SqlDialect): string {
  return dialect === 'postgres'
    ? "CHECK (digest ~ '^[0-9a-f]{64}$')"
    : "CHECK (length(digest) = 64 AND digest NOT GLOB '*[^0-9a-f]*')";
}

export const initial: SqlMigration = {
  name: '0001_initial',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      `CREATE TABLE organisations (
        id ${ID} PRIMARY KEY,
        name text NOT NULL,
        slug text NOT NULL,
        industry_section text NULL,
        is_system boolean NOT NULL DEFAULT false,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL
      )`,
      'CREATE UNIQUE INDEX organisations_slug_unique ON organisations (slug)',
      'CREATE INDEX organisations_created_at_id ON organisations (created_at, id)',
      'CREATE INDEX organisations_system_created_at_id ON organisations (is_system, created_at, id)',

      `CREATE TABLE members (
        id ${ID} PRIMARY KEY,
        organisation_id ${ID} NOT NULL REFERENCES organisations (id),
        email text NOT NULL,
        email_normalized text NOT NULL,
        created_at bigint NOT NULL
      )`,
      'CREATE UNIQUE INDEX members_organisation_email_unique ON members (organisation_id, email_normalized)',
      'CREATE INDEX members_organisation_created_at_id ON members (organisation_id, created_at, id)',

      `CREATE TABLE api_keys (
        id ${ID} PRIMARY KEY,
        organisation_id ${ID} NOT NULL REFERENCES organisations (id),
        label text NOT NULL,
        key_prefix text NOT NULL,
        digest text NOT NULL ${digestCheck(dialect)},
        expires_at bigint NULL,
        created_at bigint NOT NULL,
        revoked_at bigint NULL
      )`,
      'CREATE UNIQUE INDEX api_keys_digest_unique ON api_keys (digest)',
      'CREATE INDEX api_keys_organisation_created_at_id ON api_keys (organisation_id, created_at, id)',

      `CREATE TABLE audit_entries (
        id ${ID} PRIMARY KEY,
        kind text NOT NULL,
        occurred_at bigint NOT NULL,
        organisation_id ${ID} NOT NULL,
        key_id ${ID} NULL,
        key_prefix text NULL,
        actor_type text NOT NULL CHECK (actor_type IN ('api_key', 'operator')),
        actor_key_id ${ID} NULL
      )`,
      'CREATE INDEX audit_entries_occurred_at_id ON audit_entries (occurred_at, id)',
      'CREATE INDEX audit_entries_organisation_occurred_at_id ON audit_entries (organisation_id, occurred_at, id)',
      'CREATE INDEX audit_entries_kind_occurred_at_id ON audit_entries (kind, occurred_at, id)',
    ];
  },
};
