/**
 * Leaked keys (C-58, C-59): the exposure of an `api_key_exposed` audit entry and its
 * `secret_scanning` actor, each organisation's webhook endpoint, the webhook outbox with its claim
 * lease, and the (key, url) pairs already reported exposed.
 *
 * The actor_type CHECK of 0001 must admit the new actor. Postgres drops the constraint under
 * whatever name it was given (0001 declared it inline, so the name was generated) and adds it back
 * named. SQLite cannot alter a CHECK: the table is rebuilt (create, copy, drop, rename) and its
 * indexes recreated, inside the migration's transaction; nothing references audit_entries.
 */
import { idType, type SqlMigration } from './migration.js';

/** The actor types the audit log admits since this migration (0014 rebuilds the table with the same). */
export const ACTOR_TYPES_0002 = "('api_key', 'operator', 'secret_scanning')";

export const leakedKeys: SqlMigration = {
  name: '0002_leaked_keys',
  statements(dialect) {
    const ID = idType(dialect);
    const auditIndexes = [
      'CREATE INDEX audit_entries_occurred_at_id ON audit_entries (occurred_at, id)',
      'CREATE INDEX audit_entries_organisation_occurred_at_id ON audit_entries (organisation_id, occurred_at, id)',
      'CREATE INDEX audit_entries_kind_occurred_at_id ON audit_entries (kind, occurred_at, id)',
    ];
    const audit =
      dialect === 'postgres'
        ? [
            'ALTER TABLE audit_entries ADD COLUMN exposure_type text NULL, ADD COLUMN exposure_url text NULL, ADD COLUMN exposure_source text NULL',
            `DO $$
            DECLARE c text;
            BEGIN
              FOR c IN SELECT conname FROM pg_constraint
                WHERE conrelid = 'audit_entries'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%actor_type%'
              LOOP
                EXECUTE format('ALTER TABLE audit_entries DROP CONSTRAINT %I', c);
              END LOOP;
            END $$`,
            `ALTER TABLE audit_entries ADD CONSTRAINT audit_entries_actor_type_check CHECK (actor_type IN ${ACTOR_TYPES_0002})`,
          ]
        : [
            `CREATE TABLE audit_entries_0002 (
              id ${ID} PRIMARY KEY,
              kind text NOT NULL,
              occurred_at bigint NOT NULL,
              organisation_id ${ID} NOT NULL,
              key_id ${ID} NULL,
              key_prefix text NULL,
              actor_type text NOT NULL CHECK (actor_type IN ${ACTOR_TYPES_0002}),
              actor_key_id ${ID} NULL,
              exposure_type text NULL,
              exposure_url text NULL,
              exposure_source text NULL
            )`,
            `INSERT INTO audit_entries_0002 (id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, actor_key_id)
              SELECT id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, actor_key_id FROM audit_entries`,
            'DROP TABLE audit_entries',
            'ALTER TABLE audit_entries_0002 RENAME TO audit_entries',
            ...auditIndexes,
          ];
    return [
      ...audit,

      `CREATE TABLE webhook_endpoints (
        organisation_id ${ID} PRIMARY KEY REFERENCES organisations (id),
        url text NOT NULL,
        secret text NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL
      )`,

      `CREATE TABLE webhook_outbox (
        id ${ID} PRIMARY KEY,
        organisation_id ${ID} NOT NULL,
        event_type text NOT NULL,
        payload text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts integer NOT NULL,
        next_attempt_at bigint NOT NULL,
        created_at bigint NOT NULL,
        completed_at bigint NULL,
        last_error text NULL,
        claim_id text NULL,
        lease_until bigint NULL
      )`,
      // The claim: pending and due, oldest due first.
      'CREATE INDEX webhook_outbox_status_next_attempt_at_id ON webhook_outbox (status, next_attempt_at, id)',
      'CREATE INDEX webhook_outbox_created_at_id ON webhook_outbox (created_at, id)',
      'CREATE INDEX webhook_outbox_organisation_created_at_id ON webhook_outbox (organisation_id, created_at, id)',
      'CREATE INDEX webhook_outbox_status_created_at_id ON webhook_outbox (status, created_at, id)',

      // url_hash: lower-case hex SHA-256 of the URL, '' when the alert named none (a URL can be far
      // longer than a btree key may be).
      `CREATE TABLE api_key_exposures (
        key_id ${ID} NOT NULL,
        url_hash text NOT NULL,
        recorded_at bigint NOT NULL,
        PRIMARY KEY (key_id, url_hash)
      )`,
    ];
  },
};
