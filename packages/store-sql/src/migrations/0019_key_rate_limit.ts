/**
 * A key's own rate limit (C-290): `api_keys.rate_limit_per_minute`, requests per UTC minute counted
 * against the key besides its organisation, or NULL for none. Read with every credential, so a
 * change reaches the hot path through the credential cache's freshness rule like any other change of
 * the key. Its audit entries reuse `audit_entries.rate_limit` (0015). ADD COLUMN only.
 */
import type { SqlMigration } from './migration.js';

export const keyRateLimit: SqlMigration = {
  name: '0019_key_rate_limit',
  statements() {
    return ['ALTER TABLE api_keys ADD COLUMN rate_limit_per_minute integer NULL'];
  },
};
