/**
 * Usage counts per key and hour (requests answered, requests refused with 429), added to by each
 * instance's flush and read summed by hour or UTC day. `hour_start` is the hour's first epoch
 * millisecond. The organisation is copied from the key (a key never changes organisation) so that an
 * organisation's sum reads one index range; `hour_start` alone serves the retention's delete.
 */
import { idType, type SqlMigration } from './migration.js';

export const keyUsage: SqlMigration = {
  name: '0016_key_usage',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      `CREATE TABLE key_usage (
        key_id ${ID} NOT NULL REFERENCES api_keys (id),
        hour_start bigint NOT NULL,
        organisation_id ${ID} NOT NULL,
        requests bigint NOT NULL CHECK (requests >= 0),
        rate_limited bigint NOT NULL CHECK (rate_limited >= 0),
        PRIMARY KEY (key_id, hour_start)
      )`,
      'CREATE INDEX key_usage_organisation_hour ON key_usage (organisation_id, hour_start)',
      'CREATE INDEX key_usage_hour ON key_usage (hour_start)',
    ];
  },
};
