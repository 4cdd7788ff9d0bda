import { createHash } from 'node:crypto';
import {
  allowedCidrsOf,
  DEFAULT_KEY_POLICY,
  keyRateLimitOf,
  MAX_EXPIRY_NOTICE_SECONDS,
  decodeMetadata,
  decodeScopes,
  encodeMetadata,
  encodeScopes,
  metadataOf,
  scopesOf,
  type ApiKey,
  type ApiKeyStore,
  type Credential,
  type KeyAttributesChange,
  type KeyListFilter,
  type KeyUse,
  type PageRequest,
} from '@cos/core';
import { credentialWrite, execute, msOrNull, numberOrNull, query, stringOrNull, toBool, toDate, toDateOrNull, type StoreContext } from '../context.js';

const COLUMNS =
  'id, organisation_id, label, key_prefix, digest, expires_at, created_at, revoked_at, last_used_at, rolled_from_key_id, scopes, created_by_key_id, metadata, allowed_cidrs, rate_limit_per_minute';

/** allowed_cidrs as stored: a JSON array, NULL for any address. */
function encodeCidrs(cidrs: readonly string[] | null): string | null {
  return cidrs === null ? null : JSON.stringify(cidrs);
}

function keyFromRow(row: Record<string, unknown>): ApiKey {
  return {
    id: String(row.id),
    organisationId: String(row.organisation_id),
    label: String(row.label),
    keyPrefix: String(row.key_prefix),
    digest: String(row.digest),
    expiresAt: toDateOrNull(row.expires_at),
    createdAt: toDate(row.created_at),
    revokedAt: toDateOrNull(row.revoked_at),
    lastUsedAt: toDateOrNull(row.last_used_at),
    rolledFromKeyId: stringOrNull(row.rolled_from_key_id),
    scopes: decodeScopes(String(row.scopes)),
    createdByKeyId: stringOrNull(row.created_by_key_id),
    metadata: decodeMetadata(String(row.metadata)),
    allowedCidrs: row.allowed_cidrs === null || row.allowed_cidrs === undefined ? null : (JSON.parse(String(row.allowed_cidrs)) as string[]),
    rateLimitPerMinute: numberOrNull(row.rate_limit_per_minute),
  };
}

export function credentialFromRow(row: Record<string, unknown> | undefined): Credential | null {
  if (row === undefined) return null;
  return {
    key: keyFromRow(row),
    organisation: {
      id: String(row.organisation_id),
      name: String(row.o_name),
      slug: String(row.o_slug),
      industrySection: row.o_industry_section === null || row.o_industry_section === undefined ? null : (String(row.o_industry_section) as Credential['organisation']['industrySection']),
      isSystem: toBool(row.o_is_system),
      rateLimitPerMinute: numberOrNull(row.o_rate_limit_per_minute),
      createdAt: toDate(row.o_created_at),
      updatedAt: toDate(row.o_updated_at),
    },
  };
}

const INSERT = `INSERT INTO api_keys (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?)`;
const BY_ID = `SELECT ${COLUMNS} FROM api_keys WHERE organisation_id = ? AND id = ?`;
/** The authentication hot path: one query on the unique digest index, joined to the organisation. */
export const CREDENTIAL = `SELECT k.id, k.organisation_id, k.label, k.key_prefix, k.digest, k.expires_at, k.created_at, k.revoked_at,
  k.last_used_at, k.rolled_from_key_id, k.scopes, k.created_by_key_id, k.metadata, k.allowed_cidrs, k.rate_limit_per_minute,
  o.name AS o_name, o.slug AS o_slug, o.industry_section AS o_industry_section, o.is_system AS o_is_system,
  o.rate_limit_per_minute AS o_rate_limit_per_minute, o.created_at AS o_created_at, o.updated_at AS o_updated_at
  FROM api_keys k JOIN organisations o ON o.id = k.organisation_id WHERE k.digest = ?`;
const LIST_FIRST = `SELECT ${COLUMNS} FROM api_keys WHERE organisation_id = ? ORDER BY created_at, id LIMIT ?`;
const LIST_AFTER = `SELECT ${COLUMNS} FROM api_keys WHERE organisation_id = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?`;
/** `expiring_within` (C-283): the organisation's keys active at a time and expiring at or before another. */
const EXPIRING = 'revoked_at IS NULL AND expires_at > ? AND expires_at <= ?';
const LIST_EXPIRING_FIRST = `SELECT ${COLUMNS} FROM api_keys WHERE organisation_id = ? AND ${EXPIRING} ORDER BY created_at, id LIMIT ?`;
const LIST_EXPIRING_AFTER = `SELECT ${COLUMNS} FROM api_keys WHERE organisation_id = ? AND ${EXPIRING} AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?`;
/**
 * The keys not yet noticed that can still expire: what the expiry notices' scan reads (C-282), by
 * expiry, in a partial index that a key leaves once noticed or revoked. Migration 0018 creates it;
 * the scan's statement carries the predicate so that both dialects' planners use it.
 */
export const EXPIRY_NOTICE_INDEX = 'api_keys_expiry_notice_due';
export const EXPIRY_NOTICE_PREDICATE = 'expiry_notice_sent_at IS NULL AND revoked_at IS NULL AND expires_at IS NOT NULL';
/**
 * One range of that index, from now to now + the longest notice period any policy may set, each
 * key then kept when its own organisation's period (the default without a policy) reaches it.
 */
const EXPIRY_NOTICES_DUE = `SELECT ${COLUMNS.split(', ')
  .map((c) => `k.${c}`)
  .join(', ')} FROM api_keys k LEFT JOIN organisation_key_policies p ON p.organisation_id = k.organisation_id
  WHERE k.expiry_notice_sent_at IS NULL AND k.revoked_at IS NULL AND k.expires_at IS NOT NULL AND k.expires_at > ? AND k.expires_at <= ?
  AND k.expires_at - ? <= 1000 * CAST(coalesce(p.expiry_notice_seconds, ?) AS bigint)
  ORDER BY k.expires_at, k.id LIMIT ?`;
/** The same conditions on one key, with the record of its notice: the one statement that decides who sends it. */
const CLAIM_EXPIRY_NOTICE = `UPDATE api_keys SET expiry_notice_sent_at = ?
  WHERE id = ? AND ${EXPIRY_NOTICE_PREDICATE} AND expires_at > ?
  AND expires_at - ? <= 1000 * CAST(coalesce((SELECT p.expiry_notice_seconds FROM organisation_key_policies p WHERE p.organisation_id = api_keys.organisation_id), ?) AS bigint)`;
/** The lineage walk (C-61, C-100): one key's children in every organisation, through api_keys_created_by_created_at_id. */
const CREATED_BY = `SELECT ${COLUMNS} FROM api_keys WHERE created_by_key_id = ? ORDER BY created_at, id`;
const COUNT_ACTIVE = `SELECT count(*) AS n FROM api_keys
  WHERE organisation_id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`;
/**
 * Serialises "count active keys, then insert" (C-25) per organisation on Postgres: taken inside a unit
 * of work, the row lock is held until commit, so a concurrent issuance waits and then counts the
 * committed key. NO KEY UPDATE does not block the FOR KEY SHARE locks of foreign-key checks.
 */
const LOCK_ORGANISATION = 'SELECT id FROM organisations WHERE id = ? FOR NO KEY UPDATE';
const REVOKE = 'UPDATE api_keys SET revoked_at = ? WHERE organisation_id = ? AND id = ? AND revoked_at IS NULL';
/**
 * Only ever earlier, only on a key active at `now`: the one conditional statement that decides
 * whether this call changed the key (a concurrent revocation or roll makes it match nothing).
 */
const SHORTEN_EXPIRY = `UPDATE api_keys SET expires_at = ?
  WHERE organisation_id = ? AND id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR (expires_at > ? AND expires_at > ?))`;
/**
 * Compare-and-set of the editable attributes on a key active at `now`: it matches only while the row
 * still holds the values the caller read (metadata is stored with its names sorted, so equal
 * metadata is equal text), so of concurrent updates from one reading only one applies.
 */
const UPDATE = `UPDATE api_keys SET label = ?, metadata = ?, allowed_cidrs = ?, rate_limit_per_minute = ?
  WHERE organisation_id = ? AND id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)
  AND label = ? AND metadata = ? AND (allowed_cidrs = ? OR (allowed_cidrs IS NULL AND CAST(? AS text) IS NULL))
  AND (rate_limit_per_minute = ? OR (rate_limit_per_minute IS NULL AND CAST(? AS integer) IS NULL))`;
/**
 * A whole batch of uses in one statement with one parameter (a JSON array of [key id, epoch ms]),
 * so the text never changes with the batch size (one prepared statement, no bound-parameter limit).
 * Each key takes the latest of its current value and its latest use in the batch: instances may
 * flush in any order and a late flush never moves a key's last use back.
 */
const RECORD_USES: Readonly<Record<StoreContext['dialect'], string>> = {
  postgres: `UPDATE api_keys AS k SET last_used_at = u.at
  FROM (SELECT e ->> 0 AS id, max((e ->> 1)::bigint) AS at FROM json_array_elements(?::json) AS e GROUP BY 1) AS u
  WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`,
  sqlite: `UPDATE api_keys SET last_used_at = u.at
  FROM (SELECT value ->> 0 AS id, max(value ->> 1) AS at FROM json_each(?) GROUP BY 1) AS u
  WHERE api_keys.id = u.id AND (api_keys.last_used_at IS NULL OR api_keys.last_used_at < u.at)`,
};
/** The primary key (key_id, url_hash) decides "first time": a repeat inserts nothing. */
const RECORD_EXPOSURE = 'INSERT INTO api_key_exposures (key_id, url_hash, recorded_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING';

/** SHA-256 hex of the URL, '' for none: a fixed-length key however long the URL. */
function urlHash(url: string | null): string {
  return url === null ? '' : createHash('sha256').update(url, 'utf8').digest('hex');
}

export class SqlApiKeyStore implements ApiKeyStore {
  constructor(private readonly ctx: StoreContext) {}

  async insert(k: ApiKey): Promise<void> {
    await execute(this.ctx, INSERT, [
      k.id,
      k.organisationId,
      k.label,
      k.keyPrefix,
      k.digest,
      msOrNull(k.expiresAt),
      k.createdAt.getTime(),
      msOrNull(k.revokedAt),
      k.rolledFromKeyId ?? null,
      encodeScopes([...new Set(scopesOf(k))].sort()),
      k.createdByKeyId ?? null,
      encodeMetadata(metadataOf(k)),
      encodeCidrs(allowedCidrsOf(k)),
      keyRateLimitOf(k),
    ]);
  }

  async listCreatedBy(createdByKeyId: string): Promise<ApiKey[]> {
    return (await query(this.ctx, CREATED_BY, [createdByKeyId])).map(keyFromRow);
  }

  async findById(organisationId: string, keyId: string): Promise<ApiKey | null> {
    const rows = await query(this.ctx, BY_ID, [organisationId, keyId]);
    return rows.length === 0 ? null : keyFromRow(rows[0]!);
  }

  /** The authentication hot path (C-31): one query, the key joined to its organisation. */
  async findCredential(digest: string): Promise<Credential | null> {
    return credentialFromRow((await query(this.ctx, CREDENTIAL, [digest]))[0]);
  }

  async list(organisationId: string, page: PageRequest, filter: KeyListFilter = {}): Promise<ApiKey[]> {
    const after = page.after === null ? [] : [page.after.createdAt.getTime(), page.after.id];
    if (filter.expiring !== undefined) {
      const { now, until } = filter.expiring;
      const sql = page.after === null ? LIST_EXPIRING_FIRST : LIST_EXPIRING_AFTER;
      return (await query(this.ctx, sql, [organisationId, now.getTime(), until.getTime(), ...after, page.limit])).map(keyFromRow);
    }
    return (await query(this.ctx, page.after === null ? LIST_FIRST : LIST_AFTER, [organisationId, ...after, page.limit])).map(keyFromRow);
  }

  /**
   * Inside a unit of work on Postgres this also locks the organisation row until commit, so that
   * the count-then-insert cap (C-25) holds under concurrency. (SQLite serialises every transaction
   * on its single connection, so no lock is needed there.)
   */
  async countActive(organisationId: string, now: Date): Promise<number> {
    if (this.ctx.inTransaction && this.ctx.dialect === 'postgres') {
      await query(this.ctx, LOCK_ORGANISATION, [organisationId]);
    }
    const rows = await query<{ n: unknown }>(this.ctx, COUNT_ACTIVE, [organisationId, now.getTime()]);
    return Number(rows[0]?.n ?? 0);
  }

  async revoke(organisationId: string, keyId: string, at: Date): Promise<boolean> {
    credentialWrite(this.ctx, organisationId, 'apiKeys.revoke');
    return (await execute(this.ctx, REVOKE, [at.getTime(), organisationId, keyId])) > 0;
  }

  async shortenExpiry(organisationId: string, keyId: string, expiresAt: Date, now: Date): Promise<boolean> {
    credentialWrite(this.ctx, organisationId, 'apiKeys.shortenExpiry');
    const target = expiresAt.getTime();
    return (await execute(this.ctx, SHORTEN_EXPIRY, [target, organisationId, keyId, now.getTime(), target])) > 0;
  }

  async update(organisationId: string, keyId: string, change: KeyAttributesChange, now: Date): Promise<boolean> {
    credentialWrite(this.ctx, organisationId, 'apiKeys.update');
    const { from, to } = change;
    const fromCidrs = encodeCidrs(from.allowedCidrs);
    return (
      (await execute(this.ctx, UPDATE, [
        to.label,
        encodeMetadata(to.metadata),
        encodeCidrs(to.allowedCidrs),
        to.rateLimitPerMinute,
        organisationId,
        keyId,
        now.getTime(),
        from.label,
        encodeMetadata(from.metadata),
        fromCidrs,
        fromCidrs,
        from.rateLimitPerMinute,
        from.rateLimitPerMinute,
      ])) > 0
    );
  }

  async recordUses(uses: readonly KeyUse[]): Promise<void> {
    if (uses.length === 0) return;
    const batch = JSON.stringify(uses.map((u) => [u.keyId, u.at.getTime()]));
    await execute(this.ctx, RECORD_USES[this.ctx.dialect], [batch]);
  }

  async recordExposure(keyId: string, url: string | null, at: Date): Promise<boolean> {
    return (await execute(this.ctx, RECORD_EXPOSURE, [keyId, urlHash(url), at.getTime()])) > 0;
  }

  async listExpiryNoticesDue(now: Date, limit: number): Promise<ApiKey[]> {
    const ms = now.getTime();
    const bindings = [ms, ms + MAX_EXPIRY_NOTICE_SECONDS * 1000, ms, DEFAULT_KEY_POLICY.expiryNoticeSeconds, limit];
    return (await query(this.ctx, EXPIRY_NOTICES_DUE, bindings)).map(keyFromRow);
  }

  async claimExpiryNotice(keyId: string, now: Date): Promise<boolean> {
    const ms = now.getTime();
    return (await execute(this.ctx, CLAIM_EXPIRY_NOTICE, [ms, keyId, ms, ms, DEFAULT_KEY_POLICY.expiryNoticeSeconds])) > 0;
  }
}
