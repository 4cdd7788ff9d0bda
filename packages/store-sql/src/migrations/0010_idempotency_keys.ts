/**
 * Kept answers of requests made with an Idempotency-Key, per (organisation, key): the running claim
 * (token, lock) until the answer is kept, then status, headers (JSON) and body until expires_at.
 */
import { idType, type SqlMigration } from './migration.js';

export const idempotencyKeys: SqlMigration = {
  name: '0010_idempotency_keys',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      `CREATE TABLE idempotency_keys (
        organisation_id ${ID} NOT NULL,
        idem_key text NOT NULL,
        fingerprint text NOT NULL,
        token text NOT NULL,
        created_at bigint NOT NULL,
        expires_at bigint NOT NULL,
        locked_until bigint NOT NULL,
        response_status integer NULL,
        response_headers text NULL,
        response_body text NULL,
        PRIMARY KEY (organisation_id, idem_key)
      )`,
      'CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at)',
    ];
  },
};
