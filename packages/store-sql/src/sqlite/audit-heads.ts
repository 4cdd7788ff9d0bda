/**
 * The audit chain heads a SQLite store's own connection left, so that its next append to an
 * organisation links without reading the head (`SELECT seq, hash … ORDER BY seq DESC LIMIT 1`).
 *
 * A remembered head is used only while it is exactly what that read would answer:
 *  - `PRAGMA data_version` of the connection changes when any *other* connection, in this process
 *    or another, has committed to the file since the last read, and never for the connection's own
 *    commits (https://www.sqlite.org/pragma.html#pragma_data_version). It is read inside the unit of
 *    work, after BEGIN IMMEDIATE took the write lock, so no other connection can commit between
 *    that read and this unit of work's COMMIT: the value read in the unit of work that appended is
 *    the value a later unit of work reads if, and only if, nobody else committed in between.
 *  - Heads are remembered only when the unit of work that appended commits. A unit of work rolled
 *    back cleanly leaves them as they were (nothing it did is committed); any other ending that
 *    might have committed part of it (SQLite ending the transaction itself, a failed COMMIT or
 *    ROLLBACK) forgets every head.
 *  - The connection's own statements outside units of work (knex: migrations, a host's SQL;
 *    SqlStore.query; a single write) do not change data_version either, so they forget every head
 *    (sqlite/database.ts). Within units of work the audit log is only appended to (C-41), through
 *    SqlAuditLog.append, which tells the unit of work each head it leaves.
 * Should a remembered head ever be stale anyway, the append's seq collides with UNIQUE
 * (organisation_id, seq): the unit of work fails, the chain does not fork.
 */
import type { ChainHead, KnownAuditHeads } from '../context.js';

/** Heads of more organisations than this are not worth keeping: the set is cleared and starts again. */
const MAX_REMEMBERED = 1024;

export class RememberedAuditHeads {
  private readonly heads = new Map<string, ChainHead>();
  /** The connection's data_version at which `heads` are the committed heads; null when nothing is known. */
  private version: number | null = null;

  /** Forgets every head: the connection wrote outside a unit of work, or a unit of work ended uncertainly. */
  forget(): void {
    this.heads.clear();
    this.version = null;
  }

  /** The view of one unit of work; `dataVersion` reads the connection's PRAGMA data_version inside it. */
  unitOfWork(dataVersion: () => number): UnitOfWorkAuditHeads {
    return new UnitOfWorkAuditHeads(this, dataVersion);
  }

  /** @internal A unit of work read `version` and committed `appended` heads. */
  committed(version: number, appended: ReadonlyMap<string, ChainHead>): void {
    if (version !== this.version || this.heads.size + appended.size > MAX_REMEMBERED) {
      this.heads.clear();
      this.version = version;
    }
    for (const [organisationId, head] of appended) this.heads.set(organisationId, head);
  }

  /** @internal The committed head, when `version` is the one the heads were remembered at. */
  at(version: number, organisationId: string): ChainHead | undefined {
    return version === this.version ? this.heads.get(organisationId) : undefined;
  }
}

export class UnitOfWorkAuditHeads implements KnownAuditHeads {
  /** data_version as read in this unit of work (read once, on first use). */
  private version: number | undefined;
  /** The heads this unit of work's appends left (uncommitted). */
  private appendedHeads: Map<string, ChainHead> | null = null;

  constructor(
    private readonly remembered: RememberedAuditHeads,
    private readonly dataVersion: () => number,
  ) {}

  known(organisationId: string): ChainHead | undefined {
    const own = this.appendedHeads?.get(organisationId);
    if (own !== undefined) return own;
    this.version ??= this.dataVersion();
    return this.remembered.at(this.version, organisationId);
  }

  appended(organisationId: string, head: ChainHead): void {
    this.version ??= this.dataVersion();
    (this.appendedHeads ??= new Map()).set(organisationId, head);
  }

  /** True when this unit of work appended (its ending matters to the remembered heads). */
  get appendedAny(): boolean {
    return this.appendedHeads !== null;
  }

  /** After COMMIT succeeded. */
  committed(): void {
    if (this.appendedHeads !== null && this.version !== undefined) this.remembered.committed(this.version, this.appendedHeads);
  }
}
