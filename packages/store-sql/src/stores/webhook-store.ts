import { ALL_EVENTS, fullEndpoint, type WebhookEndpoint, type WebhookStore } from '@cos/core';
import { execute, msOrNull, query, stringOrNull, toBool, toDate, toDateOrNull, type StoreContext } from '../context.js';

const COLUMNS = 'organisation_id, url, secret, created_at, updated_at, events, enabled, previous_secret, previous_secret_expires_at';

function endpointFromRow(row: Record<string, unknown>): WebhookEndpoint {
  return {
    organisationId: String(row.organisation_id),
    url: String(row.url),
    secret: String(row.secret),
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
    // NULL (every row written before the column existed): every event.
    events: row.events === null || row.events === undefined ? [ALL_EVENTS] : String(row.events).split(' '),
    enabled: toBool(row.enabled),
    previousSecret: stringOrNull(row.previous_secret),
    previousSecretExpiresAt: toDateOrNull(row.previous_secret_expires_at),
  };
}

const GET = `SELECT ${COLUMNS} FROM webhook_endpoints WHERE organisation_id = ?`;
/** One statement on both dialects (SQLite >= 3.24 upsert): the whole record is replaced. */
const PUT = `INSERT INTO webhook_endpoints (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (organisation_id) DO UPDATE SET
    url = excluded.url, secret = excluded.secret, created_at = excluded.created_at, updated_at = excluded.updated_at,
    events = excluded.events, enabled = excluded.enabled, previous_secret = excluded.previous_secret,
    previous_secret_expires_at = excluded.previous_secret_expires_at`;
const REMOVE = 'DELETE FROM webhook_endpoints WHERE organisation_id = ?';
/** organisation_id is the primary key (COLLATE "C" on Postgres): byte order on both dialects. */
const FIRST = `SELECT ${COLUMNS} FROM webhook_endpoints ORDER BY organisation_id LIMIT ?`;
const AFTER = `SELECT ${COLUMNS} FROM webhook_endpoints WHERE organisation_id > ? ORDER BY organisation_id LIMIT ?`;
const REPLACE_SECRET = 'UPDATE webhook_endpoints SET secret = ? WHERE organisation_id = ? AND secret = ?';

/**
 * Each organisation's optional endpoint (C-59). The secret is kept as given: `whsec_…`, or sealed
 * by the core under WEBHOOK_SECRET_ENCRYPTION_KEY (the store never sees the key).
 */
export class SqlWebhookStore implements WebhookStore {
  constructor(private readonly ctx: StoreContext) {}

  async get(organisationId: string): Promise<WebhookEndpoint | null> {
    const rows = await query(this.ctx, GET, [organisationId]);
    return rows.length === 0 ? null : endpointFromRow(rows[0]!);
  }

  async put(w: WebhookEndpoint): Promise<void> {
    const full = fullEndpoint(w);
    await execute(this.ctx, PUT, [
      w.organisationId,
      w.url,
      w.secret,
      w.createdAt.getTime(),
      w.updatedAt.getTime(),
      full.events.join(' '),
      full.enabled,
      full.previousSecret,
      msOrNull(full.previousSecretExpiresAt),
    ]);
  }

  async remove(organisationId: string): Promise<boolean> {
    return (await execute(this.ctx, REMOVE, [organisationId])) > 0;
  }

  async listAfter(afterOrganisationId: string | null, limit: number): Promise<WebhookEndpoint[]> {
    const n = Math.max(0, Math.floor(limit));
    const rows = afterOrganisationId === null ? await query(this.ctx, FIRST, [n]) : await query(this.ctx, AFTER, [afterOrganisationId, n]);
    return rows.map(endpointFromRow);
  }

  async replaceSecret(organisationId: string, expected: string, next: string): Promise<boolean> {
    return (await execute(this.ctx, REPLACE_SECRET, [next, organisationId, expected])) > 0;
  }
}
