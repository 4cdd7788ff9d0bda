/**
 * Every audit row is a link of its organisation's chain (C-63, C-120): `seq` NOT NULL and at least 1,
 * `prev_hash` and `hash` NOT NULL. The service never wrote a row without them (0009 chained every
 * existing row; appends always link), so a row outside the chain was put there by hand: `audit verify`
 * walks each chain from seq 1 and would never meet it, yet listings showed it.
 *
 * A database that holds such rows is refused with their count and first ids, before anything is
 * changed: they are evidence of tampering, and deleting evidence is the operator's decision, not a
 * migration's (docs/operations.md, "Rows outside the chain"). Postgres adds the constraints in place.
 * SQLite cannot add a NOT NULL or CHECK to a column: the table is rebuilt (create, copy, drop,
 * rename) inside the migration's transaction with every index it had, the partial kind index of 0012
 * included; its CHECK also requires an integer seq (SQLite would otherwise keep text in the column).
 */
import { outsideChainPredicate, RARE_KIND_INDEX, RARE_KIND_PREDICATE } from '../stores/audit-log.js';
import { ACTOR_TYPES_0002 } from './0002_leaked_keys.js';
import type { SqlMigration } from './migration.js';

/** Rows of a list answer (knex's raw result is an array on SQLite, `{ rows }` on Postgres). */
function rowsOf(result: unknown): Array<Record<string, unknown>> {
  return (Array.isArray(result) ? result : (result as { rows: Array<Record<string, unknown>> }).rows) as Array<Record<string, unknown>>;
}

export const auditSeqChecks: SqlMigration = {
  name: '0014_audit_seq_checks',
  async before(db, dialect) {
    const outside = outsideChainPredicate(dialect);
    const rows = rowsOf(await db.raw(`SELECT organisation_id, id FROM audit_entries WHERE ${outside} ORDER BY organisation_id, id LIMIT 5`));
    if (rows.length === 0) return;
    const [count] = rowsOf(await db.raw(`SELECT count(*) AS n FROM audit_entries WHERE ${outside}`));
    const ids = rows.map((r) => `${String(r.id)} (organisation ${String(r.organisation_id)})`).join(', ');
    throw new Error(
      `migration 0014_audit_seq_checks refused: audit_entries holds ${Number(count?.n)} row(s) outside the hash chain ` +
        `(seq missing, not an integer, 0 or negative, or no hash), which the service never writes: ${ids}. Nothing was changed. ` +
        'Keep a copy of these rows as evidence, delete them, then migrate again (docs/operations.md, "Rows outside the chain").',
    );
  },
  statements(dialect) {
    if (dialect === 'postgres') {
      return [
        `ALTER TABLE audit_entries ALTER COLUMN seq SET NOT NULL, ALTER COLUMN prev_hash SET NOT NULL, ALTER COLUMN hash SET NOT NULL,
          ADD CONSTRAINT audit_entries_seq_check CHECK (seq >= 1)`,
      ];
    }
    const columns =
      'id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, actor_key_id, exposure_type, exposure_url, exposure_source, rolled_to_key_id, grace_period_seconds, actor_name, member_id, webhook_origin, notification_id, notification_type, descendant_key_ids, key_policy, seq, prev_hash, hash';
    return [
      `CREATE TABLE audit_entries_0014 (
        id text PRIMARY KEY,
        kind text NOT NULL,
        occurred_at bigint NOT NULL,
        organisation_id text NOT NULL,
        key_id text NULL,
        key_prefix text NULL,
        actor_type text NOT NULL CHECK (actor_type IN ${ACTOR_TYPES_0002}),
        actor_key_id text NULL,
        exposure_type text NULL,
        exposure_url text NULL,
        exposure_source text NULL,
        rolled_to_key_id text NULL,
        grace_period_seconds integer NULL,
        actor_name text NULL,
        member_id text NULL,
        webhook_origin text NULL,
        notification_id text NULL,
        notification_type text NULL,
        descendant_key_ids text NULL,
        key_policy text NULL,
        seq bigint NOT NULL CHECK (typeof(seq) = 'integer' AND seq >= 1),
        prev_hash text NOT NULL,
        hash text NOT NULL
      )`,
      `INSERT INTO audit_entries_0014 (${columns}) SELECT ${columns} FROM audit_entries`,
      'DROP TABLE audit_entries',
      'ALTER TABLE audit_entries_0014 RENAME TO audit_entries',
      'CREATE INDEX audit_entries_occurred_at_id ON audit_entries (occurred_at, id)',
      'CREATE INDEX audit_entries_organisation_occurred_at_id ON audit_entries (organisation_id, occurred_at, id)',
      'CREATE UNIQUE INDEX audit_entries_organisation_seq_unique ON audit_entries (organisation_id, seq)',
      `CREATE INDEX ${RARE_KIND_INDEX} ON audit_entries (kind, occurred_at, id) WHERE ${RARE_KIND_PREDICATE}`,
    ];
  },
};
