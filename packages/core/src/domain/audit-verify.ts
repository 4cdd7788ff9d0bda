/**
 * Verifying one organisation's chain (C-63), one record at a time in `seq` order, in constant
 * memory: what `cos-admin audit verify` runs over the database or over an export file. It stops at
 * the first break and says where and why:
 *  - `entry_changed`: the entry's content no longer gives its hash (or the entry before it was
 *    replaced, hash recomputed, and this one still names the old one);
 *  - `entry_missing`: a `seq` is absent (a gap, or later entries renumbered to close it);
 *  - `entries_reordered`: the entry at this `seq` was hashed at another position, and the one that
 *    belongs here follows;
 *  - `entry_inserted`: an entry stands between two that were linked to each other, or a `seq` comes twice.
 *  - `entry_outside_chain` (C-120, reported at seq 0): the organisation holds rows that are no link
 *    of its chain (seq missing, 0 or negative), which no walk along the chain meets; the store counts
 *    them and `finish` is told.
 * A signed checkpoint adds `checkpoint_truncated` (the chain ends before the checkpoint's head) and
 * `checkpoint_rewritten` (the entry at the checkpoint's `seq` has another hash: the chain up to it was
 * rewritten, even if every hash was recomputed).
 */
import { digestsEqual } from './api-key.js';
import { GENESIS_HASH, recordHash } from './audit-chain.js';

/** Hashes compared in constant time, as every digest is (C-31); a malformed hash equals nothing. */
function sameHash(a: string, b: string): boolean {
  return digestsEqual(a, b);
}

export type ChainBreakReason =
  | 'entry_changed'
  | 'entry_missing'
  | 'entries_reordered'
  | 'entry_inserted'
  | 'entry_outside_chain'
  | 'checkpoint_truncated'
  | 'checkpoint_rewritten';

export interface ChainBreak {
  readonly seq: number;
  readonly reason: ChainBreakReason;
  readonly message: string;
}

/** What `audit verify` reports for one organisation. */
export interface ChainReport {
  readonly organisation_id: string;
  readonly status: 'ok' | 'broken';
  /** Entries read (up to the break). */
  readonly entries: number;
  /** The last entry verified: seq and hash (seq 0 and 64 zeros when none was). */
  readonly head: { readonly seq: number; readonly hash: string };
  /** Where the verification started: 1, or the first seq of an export that begins later. */
  readonly first_seq: number;
  /** With a checkpoint: 'extends' when the chain holds its head; 'not_covered' when the records start after it; null otherwise. */
  readonly checkpoint: 'extends' | 'not_covered' | null;
  readonly broken?: ChainBreak;
}

/** How far from its position an entry's hash is searched for, to tell a reordering from a change. */
const REORDER_WINDOW = 1000;

/** A record as read from the store or a file (an AuditRecord, or any object with at least these members). */
export interface ChainRecord {
  readonly seq: number;
  readonly prev_hash: string;
  readonly hash: string;
}

export class ChainVerifier {
  #expected: number;
  #prev: string;
  #prevPrev: string | null = null;
  #entries = 0;
  #firstSeq: number;
  #broken: ChainBreak | undefined;
  /** An entry hashed for a later seq: missing or reordered, decided by the next record. */
  #pending: { readonly seq: number; readonly prev: string } | undefined;
  #checkpointSeen = false;

  /**
   * `anchor`: where the records start (an export that does not begin at seq 1 trusts its first
   * record's seq and prev_hash). `checkpoint`: the signed head this chain must extend.
   */
  constructor(
    readonly organisationId: string,
    private readonly checkpoint: { readonly seq: number; readonly hash: string } | null = null,
    anchor: { readonly seq: number; readonly prevHash: string } | null = null,
  ) {
    this.#expected = anchor?.seq ?? 1;
    this.#prev = anchor?.prevHash ?? GENESIS_HASH;
    this.#firstSeq = this.#expected;
    if (checkpoint !== null && checkpoint.seq === this.#expected - 1) {
      // The records start right after the checkpoint's head (or the checkpoint signed an empty chain).
      this.#checkpointSeen = true;
      if (checkpoint.seq > 0 && !sameHash(checkpoint.hash, this.#prev)) {
        this.#break(checkpoint.seq, 'checkpoint_rewritten', `the records continue from seq ${checkpoint.seq} with another hash than the checkpoint signed`);
      }
    } else if (checkpoint !== null && checkpoint.seq < this.#expected - 1) {
      // Records that start later than the checkpoint's head cannot show that it was kept.
      this.#checkpointSeen = true;
      this.#notCovered = true;
    }
  }

  #notCovered = false;

  get broken(): boolean {
    return this.#broken !== undefined;
  }

  /** Whether more records are wanted (false once the chain is broken). */
  get wantsMore(): boolean {
    return this.#broken === undefined;
  }

  push(record: ChainRecord): void {
    if (this.#broken !== undefined) return;
    const k = this.#expected;
    if (this.#pending !== undefined) {
      const pending = this.#pending;
      this.#pending = undefined;
      // Reordered: the next entry belongs at the displaced one's seq, or stands in its own place.
      // Missing: the next one was renumbered too (hashed one seq further on).
      const belongsThere = sameHash(record.prev_hash, pending.prev) || this.#hashesAt(record, pending.seq) || sameHash(recordHash(record), record.hash);
      this.#break(
        pending.seq,
        belongsThere ? 'entries_reordered' : 'entry_missing',
        belongsThere
          ? `the entry at seq ${pending.seq} was hashed for a later position: entries were moved`
          : `the entry at seq ${pending.seq} is missing (later entries were renumbered to close the gap)`,
      );
      return;
    }
    const seq = record.seq;
    if (!Number.isSafeInteger(seq) || seq < k) {
      this.#break(Number.isSafeInteger(seq) ? seq : k, 'entry_inserted', `seq ${String(seq)} comes a second time or out of order`);
      return;
    }
    if (seq > k) {
      this.#break(k, 'entry_missing', `the entry at seq ${k} is missing (the next entry has seq ${seq})`);
      return;
    }
    const hashOk = sameHash(recordHash(record), record.hash);
    if (hashOk && sameHash(record.prev_hash, this.#prev)) {
      this.#accept(record);
      return;
    }
    if (hashOk) {
      const at = Math.max(k - 1, this.#firstSeq);
      this.#break(at, 'entry_changed', `the entry at seq ${at} was replaced: the entry at seq ${k} names another predecessor`);
      return;
    }
    const origin = this.#originalSeq(record, k);
    if (origin === undefined) {
      this.#break(k, 'entry_changed', `the entry at seq ${k} was changed: its content does not give its hash`);
    } else if (origin === k - 1 && this.#prevPrev !== null && sameHash(record.prev_hash, this.#prevPrev)) {
      this.#break(k - 1, 'entry_inserted', `an entry was inserted at seq ${k - 1}: the entry after it was hashed at seq ${k - 1}`);
    } else if (origin > k) {
      this.#pending = { seq: k, prev: this.#prev };
    } else {
      this.#break(k, 'entries_reordered', `the entry at seq ${k} was hashed at seq ${origin}`);
    }
  }

  /**
   * The report once every record was pushed. `outside`: the rows of the organisation outside its
   * chain, as the store counted them (C-120); any is a break when the chain itself holds.
   */
  finish(outside?: { readonly entries: number; readonly firstId: string }): ChainReport {
    if (this.#pending !== undefined) {
      const { seq } = this.#pending;
      this.#pending = undefined;
      this.#break(seq, 'entry_missing', `the entry at seq ${seq} is missing (later entries were renumbered to close the gap)`);
    }
    if (this.#broken === undefined && this.checkpoint !== null && !this.#checkpointSeen) {
      const last = this.#expected - 1;
      this.#break(
        last + 1,
        'checkpoint_truncated',
        `the checkpoint signed seq ${this.checkpoint.seq} but the chain ends at seq ${last}: entries were removed`,
      );
    }
    if (this.#broken === undefined && outside !== undefined && outside.entries > 0) {
      this.#break(
        0,
        'entry_outside_chain',
        `${outside.entries} row${outside.entries === 1 ? ' is' : 's are'} outside the chain (seq missing, 0 or negative; first id ${outside.firstId}): rows the service never writes were inserted`,
      );
    }
    return {
      organisation_id: this.organisationId,
      status: this.#broken === undefined ? 'ok' : 'broken',
      entries: this.#entries,
      head: { seq: this.#expected - 1, hash: this.#prev },
      first_seq: this.#firstSeq,
      checkpoint: this.checkpoint === null || this.#broken !== undefined ? null : this.#notCovered ? 'not_covered' : 'extends',
      ...(this.#broken !== undefined ? { broken: this.#broken } : {}),
    };
  }

  #accept(record: ChainRecord): void {
    this.#entries += 1;
    this.#prevPrev = this.#prev;
    this.#prev = record.hash;
    this.#expected = record.seq + 1;
    if (this.checkpoint !== null && record.seq === this.checkpoint.seq) {
      this.#checkpointSeen = true;
      if (!sameHash(record.hash, this.checkpoint.hash)) {
        this.#break(
          record.seq,
          'checkpoint_rewritten',
          `the entry at seq ${record.seq} does not have the hash the checkpoint signed: the chain up to it was rewritten`,
        );
      }
    }
  }

  #break(seq: number, reason: ChainBreakReason, message: string): void {
    this.#broken = { seq, reason, message };
  }

  #hashesAt(record: ChainRecord, seq: number): boolean {
    return sameHash(recordHash({ ...record, seq }), record.hash);
  }

  /** The seq the record was hashed at, searched near its position; undefined when none gives its hash. */
  #originalSeq(record: ChainRecord, k: number): number | undefined {
    for (let d = 1; d <= REORDER_WINDOW; d++) {
      if (this.#hashesAt(record, k + d)) return k + d;
      if (k - d >= 1 && this.#hashesAt(record, k - d)) return k - d;
    }
    return undefined;
  }
}
