/**
 * The audit hash chain (C-63): each organisation's entries form one chain. Entry `seq` n (1, 2, 3, …
 * without a gap) holds `prev_hash`, the `hash` of entry n - 1 (64 zeros for seq 1), and its own
 * `hash`: the lower-case hex SHA-256 of the UTF-8 bytes of the canonical JSON of its public record
 * without the `hash` member.
 *
 * The public record is what the API, the export and the CLI show: `id, organisation_id, seq, kind,
 * occurred_at, actor, key_id, key_prefix, detail, prev_hash, hash`, where `detail` holds every
 * kind-specific field of the entry (snake_case), so a field a new kind adds is covered without any
 * change here. Canonical JSON (RFC 8785-like): object members sorted by name (UTF-16 code units),
 * members whose value is null left out (so a column added later, null on older entries, leaves their
 * hashes unchanged), no whitespace, strings escaped as JSON.stringify escapes them, numbers only as
 * safe integers. docs/operations.md ("Auditing the audit trail") gives the same rules for auditors.
 */
import { createHash, hash } from 'node:crypto';
import type { AuditActor, AuditEntry } from './audit.js';

/** The `prev_hash` of seq 1. */
export const GENESIS_HASH = '0'.repeat(64);

/** Where an entry stands in its organisation's chain. */
export interface AuditLink {
  readonly seq: number;
  readonly prevHash: string;
  readonly hash: string;
}

/** An entry as stored: the entry and its link in the chain. */
export type ChainedAuditEntry = AuditEntry & AuditLink;

/** The last entry of an organisation's chain. */
export interface AuditHead {
  readonly organisationId: string;
  readonly seq: number;
  readonly hash: string;
}

export type AuditActorRecord = { type: 'api_key'; key_id: string } | { type: 'operator'; name?: string } | { type: string };

/** The public record of an entry (API, export, CLI), over which the hash is computed. */
export interface AuditRecord {
  id: string;
  organisation_id: string;
  seq: number;
  kind: string;
  occurred_at: string;
  actor: AuditActorRecord;
  key_id: string | null;
  key_prefix: string | null;
  /** The kind-specific fields (`exposure`, `member`, `roll`, …), snake_case; `{}` when the kind has none. */
  detail: Record<string, unknown>;
  prev_hash: string;
  hash: string;
}

/** Fields every entry has; everything else an entry holds is its `detail`. */
const BASE_FIELDS: ReadonlySet<string> = new Set([
  'id',
  'kind',
  'occurredAt',
  'organisationId',
  'keyId',
  'keyPrefix',
  'actor',
  'seq',
  'prevHash',
  'hash',
]);

const snake = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A domain value as JSON: camelCase names become snake_case, dates ISO 8601 with milliseconds, undefined left out. */
function jsonOf(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(jsonOf);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[snake(k)] = jsonOf(v);
    return out;
  }
  return value;
}

function actorRecord(a: AuditActor): AuditActorRecord {
  return jsonOf(a) as AuditActorRecord;
}

/** The public record of a chained entry. */
export function auditRecord(e: ChainedAuditEntry): AuditRecord {
  const detail: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(e)) {
    if (!BASE_FIELDS.has(k) && v !== undefined) detail[snake(k)] = jsonOf(v);
  }
  return {
    id: e.id,
    organisation_id: e.organisationId,
    seq: e.seq,
    kind: e.kind,
    occurred_at: e.occurredAt.toISOString(),
    actor: actorRecord(e.actor),
    key_id: e.keyId,
    key_prefix: e.keyPrefix,
    detail,
    prev_hash: e.prevHash,
    hash: e.hash,
  };
}

/**
 * Canonical JSON: object members sorted by name and those with a null (or undefined) value left out;
 * array elements kept in order; no whitespace; numbers must be safe integers.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isSafeInteger(value)) throw new TypeError(`canonical JSON holds only safe integers, not ${value}`);
      return String(value);
    case 'object': {
      if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
      const members = Object.entries(value as Record<string, unknown>)
        .filter(([, v]) => v !== null && v !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`);
      return `{${members.join(',')}}`;
    }
    default:
      throw new TypeError(`canonical JSON cannot hold a ${typeof value}`);
  }
}

/** The hash of a public record (any object with the record's members): SHA-256 hex of its canonical JSON without `hash`. */
export function recordHash(record: object): string {
  const { hash: _ignored, ...rest } = record as Record<string, unknown>;
  return createHash('sha256').update(canonicalJson(rest), 'utf8').digest('hex');
}

/**
 * The canonical JSON of an entry's public record up to its `prev_hash` value: every member but
 * `prev_hash` and `seq`, which sort last of all (…, `organisation_id`, `prev_hash`, `seq`), so the
 * hash of the entry at any place in the chain is `auditLinkHash(prefix, prevHash, seq)`. Written out
 * for the record's fixed members instead of building the record and sorting it (the append path);
 * byte for byte what `canonicalJson` gives for the same record (tested against it).
 */
export function auditHashPrefix(entry: AuditEntry): string {
  let text = `{"actor":${actorJson(entry.actor)},"detail":${detailJson(entry)},"id":${JSON.stringify(entry.id)}`;
  if (entry.keyId !== null && entry.keyId !== undefined) text += `,"key_id":${JSON.stringify(entry.keyId)}`;
  if (entry.keyPrefix !== null && entry.keyPrefix !== undefined) text += `,"key_prefix":${JSON.stringify(entry.keyPrefix)}`;
  return `${text},"kind":${JSON.stringify(entry.kind)},"occurred_at":"${entry.occurredAt.toISOString()}","organisation_id":${JSON.stringify(entry.organisationId)},"prev_hash":`;
}

/**
 * The hash of the entry whose `auditHashPrefix` is `prefix`, linked at `seq` after `prevHash`: its
 * canonical JSON ends `"prev_hash":"<prevHash>","seq":<seq>}`. Postgres computes the same for its
 * lower-case hex heads in the append statement (store-sql's audit log): a change here goes there too.
 */
export function auditLinkHash(prefix: string, prevHash: string, seq: number): string {
  return hash('sha256', `${prefix}${JSON.stringify(prevHash)},"seq":${seq}}`, 'hex');
}

/**
 * The actor member: the shapes of AuditActor written out (a key; the operator with or without a
 * name, which canonical JSON leaves out when absent or null; the secret-scanning hook), any other
 * through the generic encoding.
 */
function actorJson(actor: AuditActor): string {
  switch (actor.type) {
    case 'api_key':
      return `{"key_id":${JSON.stringify(actor.keyId)},"type":"api_key"}`;
    case 'operator':
      return actor.name === undefined || actor.name === null ? OPERATOR_JSON : `{"name":${JSON.stringify(actor.name)},"type":"operator"}`;
    case 'secret_scanning':
      return SECRET_SCANNING_JSON;
    default:
      return canonicalJson(actorRecord(actor));
  }
}
const OPERATOR_JSON = '{"type":"operator"}';
const SECRET_SCANNING_JSON = '{"type":"secret_scanning"}';

/** The detail member: `{}` for an entry with no kind-specific field (most of them), else as auditRecord builds it. */
function detailJson(entry: AuditEntry): string {
  let detail: Record<string, unknown> | null = null;
  for (const k of Object.keys(entry)) {
    if (BASE_FIELDS.has(k)) continue;
    const v = (entry as unknown as Record<string, unknown>)[k];
    if (v !== undefined) (detail ??= {})[snake(k)] = jsonOf(v);
  }
  return detail === null ? '{}' : canonicalJson(detail);
}

/** The entry as the next link after `head` (null: the organisation's first entry). */
export function linkAuditEntry(entry: AuditEntry, head: { readonly seq: number; readonly hash: string } | null): ChainedAuditEntry {
  const seq = head === null ? 1 : head.seq + 1;
  const prevHash = head === null ? GENESIS_HASH : head.hash;
  return chainedEntry(entry, { seq, prevHash, hash: auditLinkHash(auditHashPrefix(entry), prevHash, seq) });
}

/**
 * The entry with its link: every member of the entry, then `seq`, `prevHash`, `hash`. Object.assign
 * rather than `{ ...entry, seq, … }`: V8 copies the entry's members through its slow path for the
 * spread of an object built elsewhere (several µs on the append path), and both give the same
 * plain object for an entry (own enumerable data members only).
 */
export function chainedEntry(entry: AuditEntry, link: AuditLink): ChainedAuditEntry {
  return Object.assign({}, entry, link);
}

/** Recomputes the hash of a chained entry from its content (what `cos-admin audit verify` compares with the stored hash). */
export function entryHash(e: ChainedAuditEntry): string {
  return recordHash(auditRecord(e));
}
