/**
 * An organisation's own rate limit (its plan): requests per UTC minute, or NULL for the service's
 * default (RATE_LIMIT_PER_MINUTE). Read with every credential, so a change reaches the hot path
 * through the credential cache's freshness rule like any other change of the organisation record.
 * Its audit entries (`organisation_rate_limit_changed`) keep the old and the new value as JSON in
 * `audit_entries.rate_limit`, NULL on every other entry.
 */
import type { SqlMigration } from './migration.js';

export const organisationRateLimit: SqlMigration = {
  name: '0015_organisation_rate_limit',
  statements() {
    return ['ALTER TABLE organisations ADD COLUMN rate_limit_per_minute integer NULL', 'ALTER TABLE audit_entries ADD COLUMN rate_limit text NULL'];
  },
};
