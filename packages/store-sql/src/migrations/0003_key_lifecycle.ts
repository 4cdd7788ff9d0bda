/**
 * Key lifecycle (C-58): a key's last successful authentication (written in batches,
 * accurate to 60 s), the key a rolled key replaced (unique: a key is rolled at most once, which is
 * what lets exactly one of concurrent rolls commit, on both dialects; NULLs never collide), and
 * what an `api_key_rolled` audit entry records. ADD COLUMN only: nothing is rebuilt or rewritten
 * (SQLite adds one column per statement).
 */
import { idType, type SqlMigration } from './migration.js';

export const keyLifecycle: SqlMigration = {
  name: '0003_key_lifecycle',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      'ALTER TABLE api_keys ADD COLUMN last_used_at bigint NULL',
      `ALTER TABLE api_keys ADD COLUMN rolled_from_key_id ${ID} NULL`,
      'CREATE UNIQUE INDEX api_keys_rolled_from_unique ON api_keys (rolled_from_key_id)',
      `ALTER TABLE audit_entries ADD COLUMN rolled_to_key_id ${ID} NULL`,
      'ALTER TABLE audit_entries ADD COLUMN grace_period_seconds integer NULL',
    ];
  },
};
