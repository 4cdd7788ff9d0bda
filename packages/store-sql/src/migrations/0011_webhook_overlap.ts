/**
 * Webhook endpoints their organisations manage: the events sent (event types joined by spaces,
 * `*` for all; NULL, as on every row before it: all), whether it is enabled, and the secret a
 * rotation replaced with the end of its overlap (deliveries until then carry both signatures).
 * ADD COLUMN only.
 */
import type { SqlMigration } from './migration.js';

export const webhookOverlap: SqlMigration = {
  name: '0011_webhook_overlap',
  statements(dialect) {
    const TRUE = dialect === 'postgres' ? 'true' : '1';
    return [
      'ALTER TABLE webhook_endpoints ADD COLUMN events text NULL',
      `ALTER TABLE webhook_endpoints ADD COLUMN enabled boolean NOT NULL DEFAULT ${TRUE}`,
      'ALTER TABLE webhook_endpoints ADD COLUMN previous_secret text NULL',
      'ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_expires_at bigint NULL',
    ];
  },
};
