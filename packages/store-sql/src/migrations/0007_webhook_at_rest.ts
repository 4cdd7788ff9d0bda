/**
 * Webhook changes audited and the outbox purged: what a `webhook_endpoint_set` / `_removed` /
 * `webhook_secret_rotated` entry records (the endpoint's origin only), and the notification of a
 * `notification_retried` entry; an index for the retention purge (delivered and failed rows by
 * completed_at; pending rows have none). Webhook secrets sealed at rest need no column: the sealed
 * form is text in webhook_endpoints.secret. ADD COLUMN (nullable) and CREATE INDEX only.
 */
import { idType, type SqlMigration } from './migration.js';

export const webhookAtRest: SqlMigration = {
  name: '0007_webhook_at_rest',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      'ALTER TABLE audit_entries ADD COLUMN webhook_origin text NULL',
      `ALTER TABLE audit_entries ADD COLUMN notification_id ${ID} NULL`,
      'ALTER TABLE audit_entries ADD COLUMN notification_type text NULL',
      'CREATE INDEX webhook_outbox_completed_at_id ON webhook_outbox (completed_at, id)',
    ];
  },
};
