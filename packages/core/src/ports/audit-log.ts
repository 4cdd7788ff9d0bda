import type { AuditEntry, AuditKind } from '../domain/audit.js';
import type { AuditHead, ChainedAuditEntry } from '../domain/audit-chain.js';
import type { PageRequest } from './pagination.js';

export interface AuditFilter {
  readonly organisationId?: string;
  readonly kind?: AuditKind;
}

/** One organisation's chain, a page at a time, in `seq` order. */
export interface AuditChainQuery {
  /** Entries with a greater seq (0: from the first). */
  readonly afterSeq: number;
  readonly limit: number;
  readonly kind?: AuditKind;
  /** occurred_at at or after. */
  readonly since?: Date;
  /** occurred_at before. */
  readonly until?: Date;
}

/** Rows of one organisation that are no link of its chain (seq missing or below 1): never written by `append`. */
export interface AuditOutsideChain {
  readonly organisationId: string;
  /** How many. */
  readonly entries: number;
  /** The smallest id among them. */
  readonly firstId: string;
}

/**
 * Append-only (C-41): there is no update or delete. Each organisation's entries form one hash chain
 * (C-63): `append` links the entry after the organisation's last one (seq + 1, its hash as
 * prev_hash), serialised per organisation so that concurrent writers never fork the chain or reuse
 * a seq, in the caller's unit of work when there is one.
 */
export interface AuditLog {
  append(entry: AuditEntry): Promise<ChainedAuditEntry>;
  /** Entries ordered by (occurredAt, id) ascending, strictly after `page.after`, at most `page.limit`. */
  list(filter: AuditFilter, page: PageRequest): Promise<ChainedAuditEntry[]>;
  /** One organisation's entries with seq > afterSeq matching the filters, by seq ascending, at most `limit`. */
  chain(organisationId: string, query: AuditChainQuery): Promise<ChainedAuditEntry[]>;
  /**
   * Rows outside the chains (C-120), per organisation (or of `organisationId` alone), by organisation
   * id: `chain` and `list` never return them, so `audit verify` asks for them to count every row.
   */
  outsideChain(organisationId?: string): Promise<AuditOutsideChain[]>;
  /** The last entry of every organisation that has one, by organisation id. */
  heads(): Promise<AuditHead[]>;
}
