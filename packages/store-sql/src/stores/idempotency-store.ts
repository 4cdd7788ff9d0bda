import type { IdempotencyClaim, IdempotencyClaimRequest, IdempotencyRecord, IdempotencyStore, IdempotentResponse } from '@cos/core';
import { execute, query, toDate, type StoreContext } from '../context.js';

const COLUMNS = 'organisation_id, idem_key, fingerprint, token, created_at, expires_at, locked_until, response_status, response_headers, response_body';

/**
 * One statement on both dialects: a new row, or the replacement of an expired row or of a running
 * one whose lock has ended; any other existing row is left as it is (no row affected).
 */
const CLAIM = `INSERT INTO idempotency_keys (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL)
  ON CONFLICT (organisation_id, idem_key) DO UPDATE SET
    fingerprint = excluded.fingerprint, token = excluded.token, created_at = excluded.created_at,
    expires_at = excluded.expires_at, locked_until = excluded.locked_until,
    response_status = NULL, response_headers = NULL, response_body = NULL
  WHERE idempotency_keys.expires_at <= excluded.created_at
     OR (idempotency_keys.response_status IS NULL AND idempotency_keys.locked_until <= excluded.created_at)`;
const GET = `SELECT ${COLUMNS} FROM idempotency_keys WHERE organisation_id = ? AND idem_key = ?`;
const COMPLETE = `UPDATE idempotency_keys SET response_status = ?, response_headers = ?, response_body = ?
  WHERE organisation_id = ? AND idem_key = ? AND token = ? AND response_status IS NULL`;
const RELEASE = 'DELETE FROM idempotency_keys WHERE organisation_id = ? AND idem_key = ? AND token = ? AND response_status IS NULL';
const SWEEP = 'DELETE FROM idempotency_keys WHERE expires_at <= ?';

function recordFromRow(row: Record<string, unknown>): IdempotencyRecord {
  const status = row.response_status;
  return {
    organisationId: String(row.organisation_id),
    key: String(row.idem_key),
    fingerprint: String(row.fingerprint),
    createdAt: toDate(row.created_at),
    expiresAt: toDate(row.expires_at),
    lockedUntil: toDate(row.locked_until),
    response:
      status === null || status === undefined
        ? null
        : {
            status: Number(status),
            headers: JSON.parse(String(row.response_headers)) as Record<string, string>,
            body: String(row.response_body),
          },
  };
}

/** Kept answers of requests made with an Idempotency-Key (table idempotency_keys). */
export class SqlIdempotencyStore implements IdempotencyStore {
  constructor(private readonly ctx: StoreContext) {}

  async claim(r: IdempotencyClaimRequest): Promise<IdempotencyClaim> {
    // A row swept or released between the claim and the read is free again: claim once more.
    for (let attempt = 0; attempt < 3; attempt++) {
      const written = await execute(this.ctx, CLAIM, [
        r.organisationId,
        r.key,
        r.fingerprint,
        r.token,
        r.now.getTime(),
        r.expiresAt.getTime(),
        r.lockedUntil.getTime(),
      ]);
      if (written > 0) return { kind: 'claimed' };
      const rows = await query(this.ctx, GET, [r.organisationId, r.key]);
      if (rows.length > 0) return { kind: 'existing', record: recordFromRow(rows[0]!) };
    }
    throw new Error('idempotency key claim did not settle');
  }

  async complete(organisationId: string, key: string, token: string, response: IdempotentResponse): Promise<boolean> {
    const n = await execute(this.ctx, COMPLETE, [response.status, JSON.stringify(response.headers), response.body, organisationId, key, token]);
    return n > 0;
  }

  async release(organisationId: string, key: string, token: string): Promise<boolean> {
    return (await execute(this.ctx, RELEASE, [organisationId, key, token])) > 0;
  }

  async sweep(now: Date): Promise<number> {
    return execute(this.ctx, SWEEP, [now.getTime()]);
  }
}
