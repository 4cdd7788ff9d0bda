import {
  auditHashPrefix,
  chainedEntry,
  GENESIS_HASH,
  linkAuditEntry,
  type AuditActor,
  type AuditChainQuery,
  type AuditEntry,
  type AuditFilter,
  type AuditHead,
  type AuditKind,
  type AuditLog,
  type AuditOutsideChain,
  type ChainedAuditEntry,
  type KeyPolicyChange,
  type PageRequest,
  type RateLimitChange,
  type WebhookEventType,
} from '@cos/core';
import { execute, query, stringOrNull, toDate, translated, type StoreContext } from '../context.js';
import type { SqlDialect } from '../database-url.js';
import { KeysetListSql } from '../keyset-list.js';

const ENTRY_COLUMNS =
  'id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, actor_key_id, exposure_type, exposure_url, exposure_source, actor_name, member_id, rolled_to_key_id, grace_period_seconds, webhook_origin, notification_id, notification_type, descendant_key_ids, key_policy, rate_limit, changed_fields, allowed_cidrs';
const COLUMNS = `${ENTRY_COLUMNS}, seq, prev_hash, hash`;

/** Space-joined ids ('' for none). */
function idsFromText(text: string): string[] {
  return text === '' ? [] : text.split(' ');
}

function actorFromRow(row: Record<string, unknown>): AuditActor {
  if (row.actor_type === 'api_key') return { type: 'api_key', keyId: String(row.actor_key_id) };
  if (row.actor_type === 'operator' && typeof row.actor_name === 'string') return { type: 'operator', name: row.actor_name };
  return { type: String(row.actor_type) as Exclude<AuditActor['type'], 'api_key'> };
}

const present = (v: unknown): boolean => v !== null && v !== undefined;

/** The entry of a row (without its chain columns); also what migration 0009 chains existing rows from. */
export function entryFromRow(row: Record<string, unknown>): AuditEntry {
  const entry: AuditEntry = {
    id: String(row.id),
    kind: String(row.kind) as AuditKind,
    occurredAt: toDate(row.occurred_at),
    organisationId: String(row.organisation_id),
    keyId: stringOrNull(row.key_id),
    keyPrefix: stringOrNull(row.key_prefix),
    actor: actorFromRow(row),
  };
  // Only entries that have one carry the property (C-58: api_key_exposed; member_added/_removed; api_key_rolled;
  // webhook_endpoint_set/_removed, webhook_secret_rotated; notification_retried; C-61, C-62).
  const hasExposure = present(row.exposure_type);
  const hasMember = present(row.member_id);
  const hasRoll = present(row.rolled_to_key_id);
  const hasWebhook = present(row.webhook_origin);
  const hasNotification = present(row.notification_id);
  const hasDescendants = present(row.descendant_key_ids);
  const hasPolicy = present(row.key_policy);
  const hasRateLimit = present(row.rate_limit);
  const hasChanged = present(row.changed_fields);
  const hasCidrs = present(row.allowed_cidrs);
  if (!hasExposure && !hasMember && !hasRoll && !hasWebhook && !hasNotification && !hasDescendants && !hasPolicy && !hasRateLimit && !hasChanged && !hasCidrs) return entry;
  return {
    ...entry,
    ...(hasExposure
      ? { exposure: { type: String(row.exposure_type), url: stringOrNull(row.exposure_url), source: stringOrNull(row.exposure_source) } }
      : {}),
    ...(hasMember ? { member: { id: String(row.member_id) } } : {}),
    ...(hasRoll ? { roll: { toKeyId: String(row.rolled_to_key_id), gracePeriodSeconds: Number(row.grace_period_seconds) } } : {}),
    ...(hasWebhook ? { webhook: { origin: String(row.webhook_origin) } } : {}),
    ...(hasNotification ? { notification: { id: String(row.notification_id), type: String(row.notification_type) as WebhookEventType } } : {}),
    ...(hasDescendants ? { descendantKeyIds: idsFromText(String(row.descendant_key_ids)) } : {}),
    ...(hasPolicy ? { keyPolicy: JSON.parse(String(row.key_policy)) as KeyPolicyChange } : {}),
    ...(hasRateLimit ? { rateLimit: JSON.parse(String(row.rate_limit)) as RateLimitChange } : {}),
    ...(hasChanged ? { changedFields: idsFromText(String(row.changed_fields)) } : {}),
    // JSON: the array, or `null` when the change lifted the restriction.
    ...(hasCidrs ? { allowedCidrs: JSON.parse(String(row.allowed_cidrs)) as string[] | null } : {}),
  };
}

function chainedFromRow(row: Record<string, unknown>): ChainedAuditEntry {
  return { ...entryFromRow(row), seq: Number(row.seq), prevHash: String(row.prev_hash), hash: String(row.hash) };
}

const INSERT = `INSERT INTO audit_entries (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const HEAD = 'SELECT seq, hash FROM audit_entries WHERE organisation_id = ? ORDER BY seq DESC LIMIT 1';
/**
 * Postgres: the whole append in one statement, one round trip. `cos_audit_lock_head` (migration
 * 0009) serialises appends to one organisation's chain across every connection and process until
 * the transaction ends (an advisory lock per organisation; organisations whose ids share a hashtext
 * merely wait for each other), then reads the head with a snapshot taken after the lock (a VOLATILE
 * function under READ COMMITTED), so it sees the commit of the writer that held the lock before.
 * The entry is linked after that head here: seq, prev_hash, and the hash, SHA-256 of the canonical
 * JSON whose members before `prev_hash` the core wrote out (`auditHashPrefix`, the last parameter
 * but one) followed by `"<prev_hash>","seq":<seq>}` (core's `auditLinkHash`, for a hex head).
 */
const APPEND_POSTGRES = `INSERT INTO audit_entries (${COLUMNS})
  SELECT ?, ?, ?::bigint, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::integer, ?, ?, ?, ?, ?, ?, ?, ?, link.seq, link.prev_hash,
    encode(sha256(convert_to(?::text || '"' || link.prev_hash || '","seq":' || link.seq || '}', 'UTF8')), 'hex')
  FROM (SELECT coalesce(head.head_seq, 0) + 1 AS seq, coalesce(head.head_hash, '${GENESIS_HASH}') AS prev_hash
        FROM (SELECT 1) AS one LEFT JOIN cos_audit_lock_head(?) AS head ON true) AS link
  RETURNING seq, prev_hash, hash`;
/** One pass over the (organisation_id, seq) index for the maxima of chained entries, then one lookup per organisation. */
const HEADS =
  'SELECT a.organisation_id, a.seq, a.hash FROM audit_entries a JOIN (SELECT organisation_id, max(seq) AS seq FROM audit_entries WHERE seq >= 1 GROUP BY organisation_id) h ON a.organisation_id = h.organisation_id AND a.seq = h.seq ORDER BY a.organisation_id';
/**
 * The kinds every issuance and revocation writes. The kind index leaves them out (a partial index),
 * so that an audited key commit writes one b-tree fewer; listed across organisations they walk the
 * (occurred_at, id) index, where they are dense. Migration 0012 creates the index from these
 * constants; a database keeps the predicate it was migrated with, so another set of kinds needs a
 * new migration that recreates the index.
 */
const FREQUENT_AUDIT_KINDS = Object.freeze(['api_key_issued', 'api_key_revoked'] as const satisfies readonly AuditKind[]);
/** The partial kind index's predicate, written literally into the listing by any other kind. */
export const RARE_KIND_PREDICATE = `kind NOT IN (${FREQUENT_AUDIT_KINDS.map((k) => `'${k}'`).join(', ')})`;
/** (kind, occurred_at, id) WHERE RARE_KIND_PREDICATE. */
export const RARE_KIND_INDEX = 'audit_entries_rare_kind_occurred_at_id';

/**
 * Rows that have no place in their organisation's chain (C-120): no seq, a seq below 1 (or, on
 * SQLite, one that is not an integer), or no hash. Migration 0013's constraints refuse them; a
 * database whose constraints were dropped or bypassed can still hold them, and `audit verify`
 * reports them.
 */
export function outsideChainPredicate(dialect: SqlDialect): string {
  const seq = dialect === 'sqlite' ? "typeof(seq) <> 'integer' OR seq < 1" : 'seq IS NULL OR seq < 1';
  return `(${seq} OR prev_hash IS NULL OR hash IS NULL)`;
}

const isFrequentKind = (kind: AuditKind): boolean => (FREQUENT_AUDIT_KINDS as readonly AuditKind[]).includes(kind);

/**
 * Listings show chained entries only (C-120): a row outside its chain, which `audit verify` reports,
 * is never shown as if it were an entry of the log. The unary plus keeps the term a filter on the
 * rows the listing's index yields: planners do not pick the (organisation_id, seq) index for it,
 * which would trade the listing's ordered walk for a sort.
 */
const CHAINED = '+seq >= 1';
const LIST = new KeysetListSql('audit_entries', COLUMNS, 'occurred_at', ['organisation_id', 'kind'], CHAINED);
/**
 * The listing by one rare kind across organisations: the kind stays a bound parameter and the
 * statement carries the index's predicate, so the planner can range-scan RARE_KIND_INDEX.
 */
const LIST_RARE_KIND = new KeysetListSql('audit_entries', COLUMNS, 'occurred_at', ['kind'], `${RARE_KIND_PREDICATE} AND ${CHAINED}`);

/** The SQL of each shape of `chain` (which filters are given), built once: a fixed set of statement texts. */
const CHAIN_SHAPES = new Map<string, string>();

/** The values of ENTRY_COLUMNS for an entry, in order. */
function entryColumns(e: AuditEntry): unknown[] {
  return [
    e.id,
    e.kind,
    e.occurredAt.getTime(),
    e.organisationId,
    e.keyId,
    e.keyPrefix,
    e.actor.type,
    e.actor.type === 'api_key' ? e.actor.keyId : null,
    e.exposure?.type ?? null,
    e.exposure?.url ?? null,
    e.exposure?.source ?? null,
    e.actor.type === 'operator' ? (e.actor.name ?? null) : null,
    e.member?.id ?? null,
    e.roll?.toKeyId ?? null,
    e.roll?.gracePeriodSeconds ?? null,
    e.webhook?.origin ?? null,
    e.notification?.id ?? null,
    e.notification?.type ?? null,
    e.descendantKeyIds !== undefined ? e.descendantKeyIds.join(' ') : null,
    e.keyPolicy !== undefined ? JSON.stringify(e.keyPolicy) : null,
    e.rateLimit !== undefined ? JSON.stringify({ old: e.rateLimit.old, new: e.rateLimit.new }) : null,
    e.changedFields !== undefined ? e.changedFields.join(' ') : null,
    // JSON: the array, or `null` when the change lifted the restriction.
    e.allowedCidrs !== undefined ? JSON.stringify(e.allowedCidrs) : null,
  ];
}

/** Append-only (C-41): this class has no update and no delete. */
export class SqlAuditLog implements AuditLog {

  constructor(private readonly ctx: StoreContext) {}

  /**
   * Links the entry after its organisation's head, in a transaction: the caller's unit of work, or
   * one of its own. The chain is serialised before the head is read (Postgres: the advisory lock
   * taken in APPEND_POSTGRES, held until the transaction ends; SQLite: BEGIN IMMEDIATE already holds
   * the database's write lock), so the head is the last committed one and UNIQUE (organisation_id,
   * seq) is never what decides. Postgres links and inserts in that one statement; SQLite reads the
   * head, then inserts (two calls into the embedded library, no round trip).
   */
  async append(e: AuditEntry): Promise<ChainedAuditEntry> {
    const { transaction } = this.ctx;
    if (!this.ctx.inTransaction && transaction !== undefined) {
      return translated(this.ctx.errors, () => transaction((session) => new SqlAuditLog({ ...this.ctx, session, inTransaction: true }).append(e)));
    }
    const columns = entryColumns(e);
    if (this.ctx.dialect === 'postgres') {
      const [row] = await query(this.ctx, APPEND_POSTGRES, [...columns, auditHashPrefix(e), e.organisationId]);
      return chainedEntry(e, { seq: Number(row!.seq), prevHash: String(row!.prev_hash), hash: String(row!.hash) });
    }
    const [row] = await query(this.ctx, HEAD, [e.organisationId]);
    const chained = linkAuditEntry(e, row === undefined ? null : { seq: Number(row.seq), hash: String(row.hash) });
    await execute(this.ctx, INSERT, [...columns, chained.seq, chained.prevHash, chained.hash]);
    return chained;
  }

  async list(filter: AuditFilter, page: PageRequest): Promise<ChainedAuditEntry[]> {
    const { organisationId, kind } = filter;
    // With an organisation, (organisation_id, occurred_at, id) serves every kind.
    const { sql, bindings } =
      organisationId === undefined && kind !== undefined && !isFrequentKind(kind)
        ? LIST_RARE_KIND.build([kind], page)
        : LIST.build([organisationId, kind], page);
    const rows = await query(this.ctx, sql, bindings);
    return rows.map(chainedFromRow);
  }

  async chain(organisationId: string, q: AuditChainQuery): Promise<ChainedAuditEntry[]> {
    const where = ['organisation_id = ?', 'seq > ?'];
    const bindings: unknown[] = [organisationId, q.afterSeq];
    if (q.kind !== undefined) (where.push('kind = ?'), bindings.push(q.kind));
    if (q.since !== undefined) (where.push('occurred_at >= ?'), bindings.push(q.since.getTime()));
    if (q.until !== undefined) (where.push('occurred_at < ?'), bindings.push(q.until.getTime()));
    bindings.push(q.limit);
    const shape = where.join(' AND ');
    let sql = CHAIN_SHAPES.get(shape);
    if (sql === undefined) {
      sql = `SELECT ${COLUMNS} FROM audit_entries WHERE ${shape} ORDER BY seq LIMIT ?`;
      CHAIN_SHAPES.set(shape, sql);
    }
    return (await query(this.ctx, sql, bindings)).map(chainedFromRow);
  }

  async outsideChain(organisationId?: string): Promise<AuditOutsideChain[]> {
    const sql = `SELECT organisation_id, count(*) AS n, min(id) AS first_id FROM audit_entries
      WHERE ${organisationId === undefined ? '' : 'organisation_id = ? AND '}${outsideChainPredicate(this.ctx.dialect)}
      GROUP BY organisation_id ORDER BY organisation_id`;
    return (await query(this.ctx, sql, organisationId === undefined ? [] : [organisationId])).map((r) => ({
      organisationId: String(r.organisation_id),
      entries: Number(r.n),
      firstId: String(r.first_id),
    }));
  }

  async heads(): Promise<AuditHead[]> {
    return (await query(this.ctx, HEADS, [])).map((r) => ({
      organisationId: String(r.organisation_id),
      seq: Number(r.seq),
      hash: String(r.hash),
    }));
  }
}
