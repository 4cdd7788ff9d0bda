/**
 * Schema migrations as code: a knex migration source object (no files found by glob), so the
 * same migrations run from dist/, from tsx and when bundled. Forward-only: there is no `down`.
 *
 * One schema on both dialects:
 *  - ids: text (UUIDs as produced by the core). On Postgres with COLLATE "C" so that ordering is
 *    plain byte order, the same as SQLite's BINARY and JavaScript's string comparison (C-7 ties).
 *  - timestamps: bigint epoch milliseconds (UTC by definition). Exact millisecond round trip, the
 *    same instant on both dialects, integer comparison for keyset pagination (C-6, C-7) and no
 *    driver-side time-zone parsing. Column names keep the `_at` suffix; the unit is documented here.
 *  - booleans: `boolean` (Postgres boolean; SQLite stores 0/1 and the store maps back to booleans).
 */
import type { Knex } from 'knex';
import { linkAuditEntry } from '@cos/core';
import type { SqlDialect } from './database-url.js';
import { entryFromRow, outsideChainPredicate, RARE_KIND_INDEX, RARE_KIND_PREDICATE } from './stores/audit-log.js';

export const MIGRATIONS_TABLE = 'cos_migrations';

export interface SqlMigration {
  readonly name: string;
  /**
   * Set only on a migration that is not expand-only (it drops or renames what the release before it
   * still reads): why. Operators apply such a migration to a database in use only deliberately, once
   * no instance of the previous release runs (`cos-admin migrate --allow-breaking`).
   */
  readonly breaking?: string;
  /** DDL statements, one per entry (better-sqlite3 prepares one statement at a time). */
  statements(dialect: SqlDialect): readonly string[];
  /** Checks run before `statements`, in the same transaction: a throw leaves the database as it was. */
  before?(db: Knex, dialect: SqlDialect): Promise<void>;
  /** Work that SQL alone cannot do, run after `statements` in the same transaction. */
  after?(db: Knex, dialect: SqlDialect): Promise<void>;
}

function idType(dialect: SqlDialect): string {
  return dialect === 'postgres' ? 'text COLLATE "C"' : 'text';
}

/** A raw key (57 characters, with '_') can never fit: only a lower-case hex SHA-256 does (C-31). */
function digestCheck(dialect: SqlDialect): string {
  return dialect === 'postgres'
    ? "CHECK (digest ~ '^[0-9a-f]{64}$')"
    : "CHECK (length(digest) = 64 AND digest NOT GLOB '*[^0-9a-f]*')";
}

const initial: SqlMigration = {
  name: '0001_initial',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      `CREATE TABLE organisations (
        id ${ID} PRIMARY KEY,
        name text NOT NULL,
        slug text NOT NULL,
        industry_section text NULL,
        is_system boolean NOT NULL DEFAULT false,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL
      )`,
      'CREATE UNIQUE INDEX organisations_slug_unique ON organisations (slug)',
      'CREATE INDEX organisations_created_at_id ON organisations (created_at, id)',
      'CREATE INDEX organisations_system_created_at_id ON organisations (is_system, created_at, id)',

      `CREATE TABLE members (
        id ${ID} PRIMARY KEY,
        organisation_id ${ID} NOT NULL REFERENCES organisations (id),
        email text NOT NULL,
        email_normalized text NOT NULL,
        created_at bigint NOT NULL
      )`,
      'CREATE UNIQUE INDEX members_organisation_email_unique ON members (organisation_id, email_normalized)',
      'CREATE INDEX members_organisation_created_at_id ON members (organisation_id, created_at, id)',

      `CREATE TABLE api_keys (
        id ${ID} PRIMARY KEY,
        organisation_id ${ID} NOT NULL REFERENCES organisations (id),
        label text NOT NULL,
        key_prefix text NOT NULL,
        digest text NOT NULL ${digestCheck(dialect)},
        expires_at bigint NULL,
        created_at bigint NOT NULL,
        revoked_at bigint NULL
      )`,
      'CREATE UNIQUE INDEX api_keys_digest_unique ON api_keys (digest)',
      'CREATE INDEX api_keys_organisation_created_at_id ON api_keys (organisation_id, created_at, id)',

      `CREATE TABLE audit_entries (
        id ${ID} PRIMARY KEY,
        kind text NOT NULL,
        occurred_at bigint NOT NULL,
        organisation_id ${ID} NOT NULL,
        key_id ${ID} NULL,
        key_prefix text NULL,
        actor_type text NOT NULL CHECK (actor_type IN ('api_key', 'operator')),
        actor_key_id ${ID} NULL
      )`,
      'CREATE INDEX audit_entries_occurred_at_id ON audit_entries (occurred_at, id)',
      'CREATE INDEX audit_entries_organisation_occurred_at_id ON audit_entries (organisation_id, occurred_at, id)',
      'CREATE INDEX audit_entries_kind_occurred_at_id ON audit_entries (kind, occurred_at, id)',
    ];
  },
};

const ACTOR_TYPES_0002 = "('api_key', 'operator', 'secret_scanning')";

/**
 * Leaked keys (C-58, C-59): the exposure of an `api_key_exposed` audit entry and its
 * `secret_scanning` actor, each organisation's webhook endpoint, the webhook outbox with its claim
 * lease, and the (key, url) pairs already reported exposed.
 *
 * The actor_type CHECK of 0001 must admit the new actor. Postgres drops the constraint under
 * whatever name it was given (0001 declared it inline, so the name was generated) and adds it back
 * named. SQLite cannot alter a CHECK: the table is rebuilt (create, copy, drop, rename) and its
 * indexes recreated, inside the migration's transaction; nothing references audit_entries.
 */
const leakedKeys: SqlMigration = {
  name: '0002_leaked_keys',
  statements(dialect) {
    const ID = idType(dialect);
    const auditIndexes = [
      'CREATE INDEX audit_entries_occurred_at_id ON audit_entries (occurred_at, id)',
      'CREATE INDEX audit_entries_organisation_occurred_at_id ON audit_entries (organisation_id, occurred_at, id)',
      'CREATE INDEX audit_entries_kind_occurred_at_id ON audit_entries (kind, occurred_at, id)',
    ];
    const audit =
      dialect === 'postgres'
        ? [
            'ALTER TABLE audit_entries ADD COLUMN exposure_type text NULL, ADD COLUMN exposure_url text NULL, ADD COLUMN exposure_source text NULL',
            `DO $$
            DECLARE c text;
            BEGIN
              FOR c IN SELECT conname FROM pg_constraint
                WHERE conrelid = 'audit_entries'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%actor_type%'
              LOOP
                EXECUTE format('ALTER TABLE audit_entries DROP CONSTRAINT %I', c);
              END LOOP;
            END $$`,
            `ALTER TABLE audit_entries ADD CONSTRAINT audit_entries_actor_type_check CHECK (actor_type IN ${ACTOR_TYPES_0002})`,
          ]
        : [
            `CREATE TABLE audit_entries_0002 (
              id ${ID} PRIMARY KEY,
              kind text NOT NULL,
              occurred_at bigint NOT NULL,
              organisation_id ${ID} NOT NULL,
              key_id ${ID} NULL,
              key_prefix text NULL,
              actor_type text NOT NULL CHECK (actor_type IN ${ACTOR_TYPES_0002}),
              actor_key_id ${ID} NULL,
              exposure_type text NULL,
              exposure_url text NULL,
              exposure_source text NULL
            )`,
            `INSERT INTO audit_entries_0002 (id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, actor_key_id)
              SELECT id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, actor_key_id FROM audit_entries`,
            'DROP TABLE audit_entries',
            'ALTER TABLE audit_entries_0002 RENAME TO audit_entries',
            ...auditIndexes,
          ];
    return [
      ...audit,

      `CREATE TABLE webhook_endpoints (
        organisation_id ${ID} PRIMARY KEY REFERENCES organisations (id),
        url text NOT NULL,
        secret text NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL
      )`,

      `CREATE TABLE webhook_outbox (
        id ${ID} PRIMARY KEY,
        organisation_id ${ID} NOT NULL,
        event_type text NOT NULL,
        payload text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts integer NOT NULL,
        next_attempt_at bigint NOT NULL,
        created_at bigint NOT NULL,
        completed_at bigint NULL,
        last_error text NULL,
        claim_id text NULL,
        lease_until bigint NULL
      )`,
      // The claim: pending and due, oldest due first.
      'CREATE INDEX webhook_outbox_status_next_attempt_at_id ON webhook_outbox (status, next_attempt_at, id)',
      'CREATE INDEX webhook_outbox_created_at_id ON webhook_outbox (created_at, id)',
      'CREATE INDEX webhook_outbox_organisation_created_at_id ON webhook_outbox (organisation_id, created_at, id)',
      'CREATE INDEX webhook_outbox_status_created_at_id ON webhook_outbox (status, created_at, id)',

      // url_hash: lower-case hex SHA-256 of the URL, '' when the alert named none (a URL can be far
      // longer than a btree key may be).
      `CREATE TABLE api_key_exposures (
        key_id ${ID} NOT NULL,
        url_hash text NOT NULL,
        recorded_at bigint NOT NULL,
        PRIMARY KEY (key_id, url_hash)
      )`,
    ];
  },
};

/**
 * Key lifecycle (C-58): a key's last successful authentication (written in batches,
 * accurate to 60 s), the key a rolled key replaced (unique: a key is rolled at most once, which is
 * what lets exactly one of concurrent rolls commit, on both dialects; NULLs never collide), and
 * what an `api_key_rolled` audit entry records. ADD COLUMN only: nothing is rebuilt or rewritten
 * (SQLite adds one column per statement).
 */
const keyLifecycle: SqlMigration = {
  name: '0003_key_lifecycle',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      'ALTER TABLE api_keys ADD COLUMN last_used_at bigint NULL',
      `ALTER TABLE api_keys ADD COLUMN rolled_from_key_id ${ID} NULL`,
      'CREATE UNIQUE INDEX api_keys_rolled_from_unique ON api_keys (rolled_from_key_id)',
      `ALTER TABLE audit_entries ADD COLUMN rolled_to_key_id ${ID} NULL`,
      'ALTER TABLE audit_entries ADD COLUMN grace_period_seconds integer NULL',
    ];
  },
};

/**
 * Operator audit (C-58): the operator's name as the actor of an entry (`--actor`, default
 * the OS user name), and the member of `member_added` / `member_removed` entries. Only ADD COLUMN
 * (nullable): older entries keep no name and no member; `kind` has no CHECK, and the actor_type
 * CHECK of 0002 already admits 'operator'. One column per statement, as SQLite requires.
 */
const operatorAudit: SqlMigration = {
  name: '0004_operator_audit',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      'ALTER TABLE audit_entries ADD COLUMN actor_name text NULL',
      `ALTER TABLE audit_entries ADD COLUMN member_id ${ID} NULL`,
      'ALTER TABLE audit_entries ADD COLUMN member_email text NULL',
    ];
  },
};

/**
 * The instance registry (instance-registry.ts): each `serve` instance that caches credentials
 * records itself (role 'cache') and the Redis it fences credential changes with (a URL without
 * credentials, and whether that Redis needs them), so an operator command learns that caches are
 * in use without being told; an operator command records each credential change it has in flight
 * (role 'writer', no Redis) while it checks for caches. Times are the database's clock (epoch ms),
 * written and compared by SQL only.
 */
const instanceRegistry: SqlMigration = {
  name: '0005_instance_registry',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      `CREATE TABLE instance_registry (
        instance_id ${ID} PRIMARY KEY,
        role text NOT NULL CHECK (role IN ('cache', 'writer')),
        redis_location text NULL,
        redis_auth boolean NOT NULL,
        started_at bigint NOT NULL,
        heartbeat_at bigint NOT NULL
      )`,
    ];
  },
};

/**
 * Webhook delivery per endpoint (C-59): `seq`, the outbox's write order (enqueue order, also within
 * one transaction, where `created_at` ties and ids are random), by which each organisation's due
 * notifications are claimed one at a time; existing rows are numbered in (created_at, id) order.
 * Postgres draws it from a sequence (the column's default); SQLite, whose writes are serialised,
 * takes max + 1 on insert (stores/outbox.ts), through the unique index. Partial indexes keep the
 * claim's per-organisation steps to that organisation's pending rows (in write order, with when each
 * is due, so the walk reads the index only; by when due, so an organisation with nothing due is
 * passed over in one probe) and its leased rows.
 */
const deliveryPerEndpoint: SqlMigration = {
  name: '0006_delivery_per_endpoint',
  statements(dialect) {
    const number =
      'UPDATE webhook_outbox SET seq = numbered.n FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM webhook_outbox) AS numbered WHERE webhook_outbox.id = numbered.id';
    const column =
      dialect === 'postgres'
        ? [
            'CREATE SEQUENCE webhook_outbox_seq AS bigint',
            'ALTER TABLE webhook_outbox ADD COLUMN seq bigint NULL',
            number,
            "SELECT setval('webhook_outbox_seq', (SELECT coalesce(max(seq), 0) + 1 FROM webhook_outbox), false)",
            "ALTER TABLE webhook_outbox ALTER COLUMN seq SET DEFAULT nextval('webhook_outbox_seq')",
            'ALTER TABLE webhook_outbox ALTER COLUMN seq SET NOT NULL',
            'ALTER SEQUENCE webhook_outbox_seq OWNED BY webhook_outbox.seq',
          ]
        : ['ALTER TABLE webhook_outbox ADD COLUMN seq integer NULL', number];
    return [
      ...column,
      'CREATE UNIQUE INDEX webhook_outbox_seq_unique ON webhook_outbox (seq)',
      "CREATE INDEX webhook_outbox_pending_organisation_seq ON webhook_outbox (organisation_id, seq, next_attempt_at) WHERE status = 'pending'",
      "CREATE INDEX webhook_outbox_pending_organisation_due ON webhook_outbox (organisation_id, next_attempt_at) WHERE status = 'pending'",
      "CREATE INDEX webhook_outbox_leased_organisation ON webhook_outbox (organisation_id, lease_until) WHERE status = 'pending' AND lease_until IS NOT NULL",
    ];
  },
};

/**
 * Webhook changes audited and the outbox purged: what a `webhook_endpoint_set` / `_removed` /
 * `webhook_secret_rotated` entry records (the endpoint's origin only), and the notification of a
 * `notification_retried` entry; an index for the retention purge (delivered and failed rows by
 * completed_at; pending rows have none). Webhook secrets sealed at rest need no column: the sealed
 * form is text in webhook_endpoints.secret. ADD COLUMN (nullable) and CREATE INDEX only.
 */
const webhookAtRest: SqlMigration = {
  name: '0007_webhook_at_rest',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      'ALTER TABLE audit_entries ADD COLUMN webhook_origin text NULL',
      `ALTER TABLE audit_entries ADD COLUMN notification_id ${ID} NULL`,
      'ALTER TABLE audit_entries ADD COLUMN notification_type text NULL',
      'CREATE INDEX webhook_outbox_completed_at_id ON webhook_outbox (completed_at, id)',
    ];
  },
};

/**
 * Least privilege (C-60..C-62): a key's scopes (its sorted names joined by single spaces; keys that
 * exist get every built-in scope, so they answer as before, C-56), the key that issued or rolled it
 * (null: an operator, and every key made before), with an index for the lineage walk; what an
 * exposure entry lists (descendant key ids, space-joined) and what a policy entry records (the old
 * and new policy as JSON); and one row per organisation that set a key policy. ADD COLUMN and
 * CREATE only; the scopes default is a constant, so no row is rewritten on Postgres.
 */
const leastPrivilege: SqlMigration = {
  name: '0008_least_privilege',
  statements(dialect) {
    const ID = idType(dialect);
    const all = 'api_keys:read api_keys:write audit:read members:read organisations:read organisations:write webhooks:read webhooks:write';
    return [
      `ALTER TABLE api_keys ADD COLUMN scopes text NOT NULL DEFAULT '${all}'`,
      `ALTER TABLE api_keys ADD COLUMN created_by_key_id ${ID} NULL`,
      'CREATE INDEX api_keys_created_by_created_at_id ON api_keys (created_by_key_id, created_at, id)',
      'ALTER TABLE audit_entries ADD COLUMN descendant_key_ids text NULL',
      'ALTER TABLE audit_entries ADD COLUMN key_policy text NULL',
      `CREATE TABLE organisation_key_policies (
        organisation_id ${ID} PRIMARY KEY REFERENCES organisations (id),
        max_lifetime_seconds integer NULL,
        allowed_environments text NOT NULL,
        exposure_response text NOT NULL CHECK (exposure_response IN ('revoke_key', 'revoke_key_and_descendants')),
        updated_at bigint NOT NULL
      )`,
    ];
  },
};

/** Rows chained per batch by 0009 (keyset over organisation, time, id: bounded memory on any table). */
const CHAIN_BATCH = 1000;

/**
 * Audit chain (C-63): every entry gains `seq`, `prev_hash` and `hash` (core domain/audit-chain.ts),
 * and a UNIQUE (organisation_id, seq) so that no two writers can take one seq. Member e-mail
 * addresses leave the log first (the column is dropped: entries name the member by id). Existing
 * entries are then chained per organisation in their listed order (occurred_at, id), in batches,
 * hashed by the same code as new entries; the unique index is created once they all have a seq.
 */
const auditChain: SqlMigration = {
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

/**
 * Kept answers of requests made with an Idempotency-Key, per (organisation, key): the running claim
 * (token, lock) until the answer is kept, then status, headers (JSON) and body until expires_at.
 */
const idempotencyKeys: SqlMigration = {
  name: '0010_idempotency_keys',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      `CREATE TABLE idempotency_keys (
        organisation_id ${ID} NOT NULL,
        idem_key text NOT NULL,
        fingerprint text NOT NULL,
        token text NOT NULL,
        created_at bigint NOT NULL,
        expires_at bigint NOT NULL,
        locked_until bigint NOT NULL,
        response_status integer NULL,
        response_headers text NULL,
        response_body text NULL,
        PRIMARY KEY (organisation_id, idem_key)
      )`,
      'CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at)',
    ];
  },
};

/**
 * Webhook endpoints their organisations manage: the events sent (event types joined by spaces,
 * `*` for all; NULL, as on every row before it: all), whether it is enabled, and the secret a
 * rotation replaced with the end of its overlap (deliveries until then carry both signatures).
 * ADD COLUMN only.
 */
const webhookOverlap: SqlMigration = {
  name: '0011_webhook_overlap',
  statements(dialect) {
    const TRUE = dialect === 'postgres' ? 'true' : '1';
    return [
      'ALTER TABLE webhook_endpoints ADD COLUMN events text NULL',
      `ALTER TABLE webhook_endpoints ADD COLUMN enabled boolean NOT NULL DEFAULT ${TRUE}`,
      'ALTER TABLE webhook_endpoints ADD COLUMN previous_secret text NULL',
      'ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_expires_at bigint NULL',
    ];
  },
};

/**
 * The kind index made partial: (kind, occurred_at, id) without the two kinds every issuance and
 * revocation writes (stores/audit-log.ts FREQUENT_AUDIT_KINDS), so those commits write one b-tree
 * fewer. Listings by a rare kind across organisations range-scan the new index (their statement
 * carries its predicate); by a frequent kind they walk (occurred_at, id); with an organisation,
 * (organisation_id, occurred_at, id) as before.
 */
const rareKindIndex: SqlMigration = {
  name: '0012_audit_rare_kind_index',
  statements() {
    return [
      'DROP INDEX audit_entries_kind_occurred_at_id',
      `CREATE INDEX ${RARE_KIND_INDEX} ON audit_entries (kind, occurred_at, id) WHERE ${RARE_KIND_PREDICATE}`,
    ];
  },
};

/**
 * A Redis's identity in the instance registry: the random id a caching instance read from its Redis
 * (a key kept in that Redis itself, limiter-redis `identity()`), so that an operator command proves
 * the Redis it reached is the instances' before it fences a change there, whatever address it
 * reached it by. NULL for rows written by instances that record none (a version before this one).
 */
const redisIdentity: SqlMigration = {
  name: '0013_redis_identity',
  statements() {
    return ['ALTER TABLE instance_registry ADD COLUMN redis_identity text NULL'];
  },
};

/** Rows of a list answer (knex's raw result is an array on SQLite, `{ rows }` on Postgres). */
function rowsOf(result: unknown): Array<Record<string, unknown>> {
  return (Array.isArray(result) ? result : (result as { rows: Array<Record<string, unknown>> }).rows) as Array<Record<string, unknown>>;
}

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
const auditSeqChecks: SqlMigration = {
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

/**
 * Usage counts per key and hour (requests answered, requests refused with 429), added to by each
 * instance's flush and read summed by hour or UTC day. `hour_start` is the hour's first epoch
 * millisecond. The organisation is copied from the key (a key never changes organisation) so that an
 * organisation's sum reads one index range; `hour_start` alone serves the retention's delete.
 */
const keyUsage: SqlMigration = {
  name: '0016_key_usage',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      `CREATE TABLE key_usage (
        key_id ${ID} NOT NULL REFERENCES api_keys (id),
        hour_start bigint NOT NULL,
        organisation_id ${ID} NOT NULL,
        requests bigint NOT NULL CHECK (requests >= 0),
        rate_limited bigint NOT NULL CHECK (rate_limited >= 0),
        PRIMARY KEY (key_id, hour_start)
      )`,
      'CREATE INDEX key_usage_organisation_hour ON key_usage (organisation_id, hour_start)',
      'CREATE INDEX key_usage_hour ON key_usage (hour_start)',
    ];
  },
};

/** Every migration, oldest first. Append only; never edit or reorder a released entry. */
export const MIGRATIONS: readonly SqlMigration[] = Object.freeze([
  initial,
  leakedKeys,
  keyLifecycle,
  operatorAudit,
  instanceRegistry,
  deliveryPerEndpoint,
  webhookAtRest,
  leastPrivilege,
  auditChain,
  idempotencyKeys,
  webhookOverlap,
  rareKindIndex,
  redisIdentity,
  auditSeqChecks,
  keyUsage,
]);

export function migrationSource(dialect: SqlDialect): Knex.MigrationSource<SqlMigration> {
  return {
    getMigrations: () => Promise.resolve([...MIGRATIONS]),
    getMigrationName: (migration) => migration.name,
    getMigration: (migration) =>
      Promise.resolve({
        async up(db: Knex): Promise<void> {
          await migration.before?.(db, dialect);
          for (const sql of migration.statements(dialect)) await db.raw(sql);
          await migration.after?.(db, dialect);
        },
        down(): Promise<void> {
          return Promise.reject(new Error(`migration ${migration.name} is forward-only`));
        },
      }),
  };
}

export function migratorConfig(dialect: SqlDialect): Knex.MigratorConfig {
  return {
    migrationSource: migrationSource(dialect),
    // Our own bookkeeping table: embedded in a host's knex, the host's knex_migrations stays untouched.
    tableName: MIGRATIONS_TABLE,
  };
}

const TABLE_EXISTS: Readonly<Record<SqlDialect, string>> = {
  postgres: 'SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?',
  sqlite: "SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ?",
};

/**
 * Names of migrations not yet applied, without creating the bookkeeping table (read-only). Two
 * statements through the store's own connections (so under its deadline), with the checks knex's
 * migrator makes (`hasTable` in the current schema, then the recorded names).
 */
export async function pendingMigrationNames(
  dialect: SqlDialect,
  query: (sql: string, bindings: readonly unknown[]) => Promise<Array<Record<string, unknown>>>,
): Promise<string[]> {
  const all = MIGRATIONS.map((m) => m.name);
  const [exists] = await query(TABLE_EXISTS[dialect], [MIGRATIONS_TABLE]);
  if (Number(exists?.n ?? 0) === 0) return all;
  const done = new Set((await query(`SELECT name FROM ${MIGRATIONS_TABLE}`, [])).map((r) => String(r.name)));
  return all.filter((name) => !done.has(name));
}
