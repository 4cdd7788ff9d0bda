/**
 * Audit chain (C-63): every entry gains `seq`, `prev_hash` and `hash` (core domain/audit-chain.ts),
 * and a UNIQUE (organisation_id, seq) so that no two writers can take one seq. Member e-mail
 * addresses leave the log first (the column is dropped: entries name the member by id). Existing
 * entries are then chained per organisation in their listed order (occurred_at, id), in batches,
 * hashed by the same code as new entries; the unique index is created once they all have a seq.
 */
import { linkAuditEntry } from '@cos/core';
import { entryFromRow } from '../stores/audit-log.js';
import type { SqlMigration } from './migration.js';

/** Rows chained per batch by 0009 (keyset over organisation, time, id: bounded memory on any table). */
const CHAIN_BATCH = 1000;

export const auditChain: SqlMigration = {
  name: '0009_audit_chain',
  statements(dialect) {
    return [
      'ALTER TABLE audit_entries DROP COLUMN member_email',
      'ALTER TABLE audit_entries ADD COLUMN seq bigint NULL',
      'ALTER TABLE audit_entries ADD COLUMN prev_hash text NULL',
      'ALTER TABLE audit_entries ADD COLUMN hash text NULL',
      // Postgres: the lock and the head read of an append in one round trip. The function takes
      // the organisation's transaction-scoped advisory lock (two-key form, its own lock space;
      // 0x434f5341 = "COSA"), then reads the head. A VOLATILE function's query takes a new
      // snapshot under READ COMMITTED, so it sees the commit of the writer that held the lock.
      ...(dialect === 'postgres'
        ? [
            `CREATE FUNCTION cos_audit_lock_head(org text) RETURNS TABLE (head_seq bigint, head_hash text)
              LANGUAGE plpgsql VOLATILE AS $$
              BEGIN
                PERFORM pg_advisory_xact_lock(1129271105, hashtext(org));
                RETURN QUERY SELECT a.seq, a.hash FROM audit_entries a WHERE a.organisation_id = org COLLATE "C" ORDER BY a.seq DESC LIMIT 1;
              END $$`,
          ]
        : []),
    ];
  },
  async after(db) {
    // Every column an entry is read back from (stores/audit-log.ts), so what is chained here is what verify reads.
    const columns =
      'id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, actor_key_id, exposure_type, exposure_url, exposure_source, actor_name, member_id, rolled_to_key_id, grace_period_seconds, webhook_origin, notification_id, notification_type, descendant_key_ids, key_policy';
    let after: { org: string; at: number; id: string } | null = null;
    let head: { org: string; seq: number; hash: string } | null = null;
    for (;;) {
      const rows = (await db.raw(
        `SELECT ${columns} FROM audit_entries${after === null ? '' : ' WHERE (organisation_id, occurred_at, id) > (?, ?, ?)'} ORDER BY organisation_id, occurred_at, id LIMIT ?`,
        after === null ? [CHAIN_BATCH] : [after.org, after.at, after.id, CHAIN_BATCH],
      )) as unknown;
      const list = (Array.isArray(rows) ? rows : (rows as { rows: Array<Record<string, unknown>> }).rows) as Array<Record<string, unknown>>;
      if (list.length === 0) break;
      for (const row of list) {
        const entry = entryFromRow(row);
        const chained = linkAuditEntry(entry, head !== null && head.org === entry.organisationId ? head : null);
        await db.raw('UPDATE audit_entries SET seq = ?, prev_hash = ?, hash = ? WHERE id = ?', [chained.seq, chained.prevHash, chained.hash, chained.id]);
        head = { org: entry.organisationId, seq: chained.seq, hash: chained.hash };
      }
      const last = list[list.length - 1]!;
      after = { org: String(last.organisation_id), at: Number(last.occurred_at), id: String(last.id) };
    }
    await db.raw('CREATE UNIQUE INDEX audit_entries_organisation_seq_unique ON audit_entries (organisation_id, seq)');
  },
};
