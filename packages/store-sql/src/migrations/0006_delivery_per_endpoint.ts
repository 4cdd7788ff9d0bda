/**
 * Webhook delivery per endpoint (C-59): `seq`, the outbox's write order (enqueue order, also within
 * one transaction, where `created_at` ties and ids are random), by which each organisation's due
 * notifications are claimed one at a time; existing rows are numbered in (created_at, id) order.
 * Postgres draws it from a sequence (the column's default); SQLite, whose writes are serialised,
 * takes max + 1 on insert (stores/outbox.ts), through the unique index. Partial indexes keep the
 * claim's per-organisation steps to that organisation's pending rows (in write order, with when each
 * is due, so the walk reads the index only; by when due, so an organisation with nothing due is
 * passed over in one probe) and its leased rows.
 */
import type { SqlMigration } from './migration.js';

export const deliveryPerEndpoint: SqlMigration = {
  name: '0006_delivery_per_endpoint',
  statements(dialect) {
    const number =
      'UPDATE webhook_outbox SET seq = numbered.n FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM webhook_outbox) AS numbered WHERE webhook_outbox.id = numbered.id';
    const column =
      dialect === 'postgres'
        ? [
            'CREATE SEQUENCE webhook_outbox_seq AS bigint',
            'ALTER TABLE webhook_outbox ADD COLUMN seq bigint NULL',
            number,
            "SELECT setval('webhook_outbox_seq', (SELECT coalesce(max(seq), 0) + 1 FROM webhook_outbox), false)",
            "ALTER TABLE webhook_outbox ALTER COLUMN seq SET DEFAULT nextval('webhook_outbox_seq')",
            'ALTER TABLE webhook_outbox ALTER COLUMN seq SET NOT NULL',
            'ALTER SEQUENCE webhook_outbox_seq OWNED BY webhook_outbox.seq',
          ]
        : ['ALTER TABLE webhook_outbox ADD COLUMN seq integer NULL', number];
    return [
      ...column,
      'CREATE UNIQUE INDEX webhook_outbox_seq_unique ON webhook_outbox (seq)',
      "CREATE INDEX webhook_outbox_pending_organisation_seq ON webhook_outbox (organisation_id, seq, next_attempt_at) WHERE status = 'pending'",
      "CREATE INDEX webhook_outbox_pending_organisation_due ON webhook_outbox (organisation_id, next_attempt_at) WHERE status = 'pending'",
      "CREATE INDEX webhook_outbox_leased_organisation ON webhook_outbox (organisation_id, lease_until) WHERE status = 'pending' AND lease_until IS NOT NULL",
    ];
  },
};
