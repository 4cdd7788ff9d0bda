/**
 * Expiry notices (C-280, C-282): each key policy's notice period, `expiry_notice_seconds` (0 to 90
 * days; a constant default of 7 days, so no row is rewritten on Postgres and a policy set before
 * keeps the default), and on `api_keys` the time the key's `api_key.expiring` notice was recorded
 * (NULL: not yet), with the partial index the scan reads: the keys not yet noticed, not revoked,
 * with an expiry, by expiry. ADD COLUMN and CREATE INDEX only.
 */
import { EXPIRY_NOTICE_INDEX, EXPIRY_NOTICE_PREDICATE } from '../stores/api-key-store.js';
import type { SqlMigration } from './migration.js';

export const expiryNotices: SqlMigration = {
  name: '0018_expiry_notices',
  statements() {
    return [
      'ALTER TABLE organisation_key_policies ADD COLUMN expiry_notice_seconds integer NOT NULL DEFAULT 604800 CHECK (expiry_notice_seconds BETWEEN 0 AND 7776000)',
      'ALTER TABLE api_keys ADD COLUMN expiry_notice_sent_at bigint NULL',
      `CREATE INDEX ${EXPIRY_NOTICE_INDEX} ON api_keys (expires_at) WHERE ${EXPIRY_NOTICE_PREDICATE}`,
    ];
  },
};
