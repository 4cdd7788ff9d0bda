/**
 * The audit trail's integrity tools (C-63), used by `cos-admin audit verify | checkpoint | export`:
 * recomputing every organisation's chain from the store or from an export file, signed checkpoints
 * of every chain's head (Ed25519, node:crypto), and the JSON Lines export. Everything streams: the
 * store is read a page of entries at a time, a file a line at a time, so memory stays bounded
 * whatever the length of the log (figure in docs/performance.md).
 */
import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { auditRecord, canonicalJson, ChainVerifier, type AuditHead, type AuditLog, type AuditOutsideChain, type ChainRecord, type ChainReport } from '@cos/core';
import { CliError } from './errors.js';

/** Entries read per query while verifying or exporting. */
const AUDIT_PAGE = 1000;

interface CheckpointHead {
  readonly organisation_id: string;
  readonly seq: number;
  readonly hash: string;
}

/** A signed checkpoint file: every organisation's head at `created_at`, signed with Ed25519 over the canonical JSON of the other members. */
export interface Checkpoint {
  readonly version: 1;
  readonly created_at: string;
  readonly heads: readonly CheckpointHead[];
  readonly signature: { readonly algorithm: 'ed25519'; readonly value: string };
}

function signedBytes(c: Pick<Checkpoint, 'version' | 'created_at' | 'heads'>): Buffer {
  return Buffer.from(canonicalJson({ version: c.version, created_at: c.created_at, heads: c.heads }), 'utf8');
}

function ed25519Key(pem: string, kind: 'private' | 'public'): KeyObject {
  let key: KeyObject;
  try {
    key = kind === 'private' ? createPrivateKey(pem) : createPublicKey(pem);
  } catch {
    throw new CliError(`the ${kind} key is not a PEM key`, { code: 'BAD_KEY' });
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new CliError(`the ${kind} key must be an Ed25519 key, not ${String(key.asymmetricKeyType)}`, { code: 'BAD_KEY' });
  return key;
}

/** Every organisation's head, signed. */
export function signCheckpoint(heads: readonly AuditHead[], at: Date, privateKeyPem: string): Checkpoint {
  const key = ed25519Key(privateKeyPem, 'private');
  const body = {
    version: 1 as const,
    created_at: at.toISOString(),
    heads: heads.map((h) => ({ organisation_id: h.organisationId, seq: h.seq, hash: h.hash })),
  };
  return { ...body, signature: { algorithm: 'ed25519', value: sign(null, signedBytes(body), key).toString('base64') } };
}

/** The checkpoint of a file's text, once its signature holds under `publicKeyPem`; otherwise a CliError. */
export function openCheckpoint(text: string, publicKeyPem: string): Checkpoint {
  const key = ed25519Key(publicKeyPem, 'public');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CliError('the checkpoint file is not JSON', { code: 'BAD_CHECKPOINT' });
  }
  const c = parsed as Partial<Checkpoint>;
  const wellFormed =
    c !== null &&
    typeof c === 'object' &&
    c.version === 1 &&
    typeof c.created_at === 'string' &&
    Array.isArray(c.heads) &&
    c.heads.every((h) => typeof h?.organisation_id === 'string' && Number.isSafeInteger(h?.seq) && typeof h?.hash === 'string') &&
    c.signature?.algorithm === 'ed25519' &&
    typeof c.signature.value === 'string';
  if (!wellFormed) throw new CliError('the checkpoint file is not a cos-admin audit checkpoint', { code: 'BAD_CHECKPOINT' });
  const cp = c as Checkpoint;
  if (!verify(null, signedBytes(cp), key, Buffer.from(cp.signature.value, 'base64'))) {
    throw new CliError('the checkpoint signature does not verify with this public key: the checkpoint was altered or signed by another key', {
      code: 'BAD_CHECKPOINT',
    });
  }
  return cp;
}

function checkpointHeads(checkpoint: Checkpoint | null): Map<string, { seq: number; hash: string }> {
  return new Map((checkpoint?.heads ?? []).map((h) => [h.organisation_id, { seq: h.seq, hash: h.hash }]));
}

/**
 * The organisations to go through: those with entries (or `org`), those with rows outside their
 * chain (`outside`, for verify), and those a checkpoint names.
 */
async function organisationsOf(
  audit: AuditLog,
  org: string | undefined,
  checkpoint: Checkpoint | null,
  outside: readonly AuditOutsideChain[] = [],
): Promise<string[]> {
  const ids = new Set<string>();
  if (org !== undefined) ids.add(org);
  else for (const h of await audit.heads()) ids.add(h.organisationId);
  for (const o of outside) ids.add(o.organisationId);
  for (const h of checkpoint?.heads ?? []) if (org === undefined || h.organisation_id === org) ids.add(h.organisation_id);
  return [...ids].sort();
}

/** Recomputes the chain of every organisation (or of `org`) from the store, a page at a time. */
export async function verifyStore(
  audit: AuditLog,
  options: { readonly org?: string; readonly checkpoint?: Checkpoint | null; readonly pageSize?: number } = {},
): Promise<ChainReport[]> {
  const checkpoint = options.checkpoint ?? null;
  const signed = checkpointHeads(checkpoint);
  const reports: ChainReport[] = [];
  // Every row of an organisation counts, whatever its seq (C-120): the rows the chain walk below
  // cannot meet are counted first; a row appended meanwhile is always linked, so never among them.
  const outside = await audit.outsideChain(options.org);
  const outsideOf = new Map(outside.map((o) => [o.organisationId, o]));
  for (const org of await organisationsOf(audit, options.org, checkpoint, outside)) {
    const v = new ChainVerifier(org, checkpoint === null ? null : (signed.get(org) ?? { seq: 0, hash: '' }));
    let after = 0;
    while (v.wantsMore) {
      const page = await audit.chain(org, { afterSeq: after, limit: options.pageSize ?? AUDIT_PAGE });
      if (page.length === 0) break;
      for (const e of page) {
        v.push(auditRecord(e));
        if (!v.wantsMore) break;
      }
      after = page[page.length - 1]!.seq;
    }
    reports.push(v.finish(outsideOf.get(org)));
  }
  return reports;
}

/**
 * Verifies an export file alone, a line at a time. Each organisation's lines must be one unbroken
 * piece of its chain: the first line's seq and prev_hash anchor it (seq 1 must follow 64 zeros).
 */
export async function verifyFile(path: string, options: { readonly checkpoint?: Checkpoint | null } = {}): Promise<ChainReport[]> {
  const checkpoint = options.checkpoint ?? null;
  const signed = checkpointHeads(checkpoint);
  const verifiers = new Map<string, ChainVerifier>();
  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  let n = 0;
  try {
    for await (const line of lines) {
      n += 1;
      if (line.trim() === '') continue;
      let record: ChainRecord & { organisation_id?: unknown };
      try {
        record = JSON.parse(line) as ChainRecord & { organisation_id?: unknown };
      } catch {
        throw new CliError(`${path}: line ${n} is not JSON`, { code: 'BAD_EXPORT' });
      }
      if (typeof record?.organisation_id !== 'string' || !Number.isSafeInteger(record.seq) || typeof record.prev_hash !== 'string' || typeof record.hash !== 'string') {
        throw new CliError(`${path}: line ${n} is not an audit record (organisation_id, seq, prev_hash, hash)`, { code: 'BAD_EXPORT' });
      }
      const org = record.organisation_id;
      let v = verifiers.get(org);
      if (v === undefined) {
        const anchor = record.seq > 1 ? { seq: record.seq, prevHash: record.prev_hash } : null;
        v = new ChainVerifier(org, checkpoint === null ? null : (signed.get(org) ?? { seq: 0, hash: '' }), anchor);
        verifiers.set(org, v);
      }
      v.push(record);
    }
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw new CliError(`${path}: ${(e as Error).message}`, { code: 'BAD_EXPORT' });
  }
  for (const org of signed.keys()) if (!verifiers.has(org)) verifiers.set(org, new ChainVerifier(org, signed.get(org)!));
  return [...verifiers.keys()].sort().map((org) => verifiers.get(org)!.finish());
}

export interface ExportOptions {
  readonly org?: string;
  /** From the first entry that occurred at or after this instant. */
  readonly since?: Date;
  /** Up to (not including) the first entry that occurred at or after this instant. */
  readonly until?: Date;
  readonly pageSize?: number;
}

/**
 * Writes the log as JSON Lines, one public record per line, organisation by organisation in seq
 * order. With --since/--until each organisation's lines are one unbroken piece of its chain (from
 * its first entry at or after `since` to the last before the first at or after `until`), so the
 * file verifies alone. Waits for `out` to drain: memory stays bounded.
 */
export async function exportLog(audit: AuditLog, out: Writable, options: ExportOptions = {}): Promise<number> {
  const pageSize = options.pageSize ?? AUDIT_PAGE;
  const until = options.until?.getTime();
  let written = 0;
  for (const org of await organisationsOf(audit, options.org, null)) {
    let after = 0;
    if (options.since !== undefined) {
      const [first] = await audit.chain(org, { afterSeq: 0, limit: 1, since: options.since });
      if (first === undefined) continue;
      after = first.seq - 1;
    }
    let done = false;
    while (!done) {
      const page = await audit.chain(org, { afterSeq: after, limit: pageSize });
      if (page.length === 0) break;
      for (const e of page) {
        if (until !== undefined && e.occurredAt.getTime() >= until) {
          done = true;
          break;
        }
        if (!out.write(`${JSON.stringify(auditRecord(e))}\n`)) await once(out, 'drain');
        written += 1;
      }
      after = page[page.length - 1]!.seq;
    }
  }
  return written;
}

/** One line per organisation for people. */
export function reportLine(r: ChainReport): string {
  if (r.broken !== undefined) return `${r.organisation_id}  BROKEN at seq ${r.broken.seq}: ${r.broken.reason} (${r.broken.message})`;
  const cp = r.checkpoint === 'extends' ? ', extends the checkpoint' : r.checkpoint === 'not_covered' ? ', starts after the checkpoint' : '';
  return `${r.organisation_id}  ok (${r.entries} entr${r.entries === 1 ? 'y' : 'ies'}, head seq ${r.head.seq}${cp})`;
}
