/**
 * The instance registry (table `instance_registry`, migration 0005): every `serve` instance that
 * caches credentials records itself here (role 'cache') with the Redis it fences credential changes
 * with, and refreshes its row (a heartbeat) while it runs; it removes the row on a clean shutdown.
 * An operator command records each credential change it has in flight (role 'writer') and then
 * reads the live cache rows, so it fences the change in their Redis (or refuses) even when it was
 * not given REDIS_URL; an instance that registers reads the live writer rows after its own row is
 * written. Of a command and an instance doing this at the same time at least one sees the other
 * (each writes before it reads): the command fences, or the instance waits for the command.
 *
 * Times are the database's clock only (epoch ms computed by SQL): a heartbeat is written with the
 * database's "now" and a row is live while the database's "now" is less than `liveMs` past it, so
 * the hosts' clocks never meet. The Redis location is a URL without credentials
 * (`redis://host:port/db`); `redis_auth` says whether that Redis needs credentials the command
 * cannot take from here. `redis_identity` (migration 0013) is the random id kept in that Redis
 * itself, as the instance read it there: what a command compares with the Redis it reached, since
 * one address can name different Redis servers on different hosts. NULL when the instance recorded
 * none (a version before the column, or its Redis did not answer yet).
 */
import { REGISTRY_PRUNE_AFTER_MS, type InstanceRecord, type InstanceRegistration, type InstanceRegistry } from '@cos/core';
import type { SqlDialect } from './database-url.js';

/** What the registry needs of a SqlStore: its dialect and one statement under its deadline. */
export interface RegistryDatabase {
  readonly dialect: SqlDialect;
  query<T = Record<string, unknown>>(sql: string, bindings?: readonly unknown[]): Promise<T[]>;
}

/** The database's clock in epoch ms; one value throughout a statement (its start), as SQLite's 'now' is. */
const NOW_MS: Readonly<Record<SqlDialect, string>> = {
  postgres: '(extract(epoch from statement_timestamp()) * 1000)::bigint',
  sqlite: "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
};

/** The registry on a SQL store (core's InstanceRegistry port). */
export class SqlInstanceRegistry implements InstanceRegistry {
  private readonly now: string;

  constructor(private readonly db: RegistryDatabase) {
    this.now = NOW_MS[db.dialect];
  }

  /**
   * Records the caching instance, or refreshes its heartbeat (the row is re-created if it was
   * removed). An identity of null keeps the one recorded before.
   */
  async heartbeat(registration: InstanceRegistration): Promise<void> {
    const now = this.now;
    await this.db.query(
      `INSERT INTO instance_registry (instance_id, role, redis_location, redis_auth, redis_identity, started_at, heartbeat_at)
       VALUES (?, 'cache', ?, ?, ?, ${now}, ${now})
       ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = ${now}, redis_location = excluded.redis_location, redis_auth = excluded.redis_auth,
         redis_identity = coalesce(excluded.redis_identity, instance_registry.redis_identity)`,
      [registration.instanceId, registration.redisLocation, this.bool(registration.redisAuth), registration.redisIdentity ?? null],
    );
  }

  /** Records a credential change in flight (an operator command's), until endWrite(). */
  async beginWrite(writeId: string): Promise<void> {
    const now = this.now;
    await this.db.query(
      `INSERT INTO instance_registry (instance_id, role, redis_location, redis_auth, started_at, heartbeat_at) VALUES (?, 'writer', NULL, ?, ${now}, ${now})`,
      [writeId, this.bool(false)],
    );
  }

  async endWrite(writeId: string): Promise<void> {
    await this.db.query("DELETE FROM instance_registry WHERE instance_id = ? AND role = 'writer'", [writeId]);
  }

  /** How many credential changes of operator commands are in flight (recorded less than `liveMs` ago). */
  async writesInFlight(liveMs: number): Promise<number> {
    const [row] = await this.db.query<Record<string, unknown>>(
      `SELECT count(*) AS n FROM instance_registry WHERE role = 'writer' AND heartbeat_at > ${this.now} - ?`,
      [Math.floor(liveMs)],
    );
    return Number(row?.['n'] ?? 0);
  }

  /** Deletes rows whose heartbeat is older than `olderThanMs` (dead instances and commands; not live ones). */
  async prune(olderThanMs: number = REGISTRY_PRUNE_AFTER_MS): Promise<void> {
    await this.db.query(`DELETE FROM instance_registry WHERE heartbeat_at < ${this.now} - ?`, [Math.floor(olderThanMs)]);
  }

  /** Removes the instance's row (a clean shutdown). */
  async remove(instanceId: string): Promise<void> {
    await this.db.query("DELETE FROM instance_registry WHERE instance_id = ? AND role = 'cache'", [instanceId]);
  }

  /** The caching instances whose last heartbeat is less than `liveMs` old by the database's clock, oldest first. */
  async live(liveMs: number): Promise<InstanceRecord[]> {
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT instance_id, redis_location, redis_auth, redis_identity, started_at, heartbeat_at, ${this.now} - heartbeat_at AS age_ms
       FROM instance_registry WHERE role = 'cache' AND heartbeat_at > ${this.now} - ? ORDER BY started_at, instance_id`,
      [Math.floor(liveMs)],
    );
    return rows.map((r) => ({
      instanceId: String(r['instance_id']),
      redisLocation: String(r['redis_location']),
      redisAuth: r['redis_auth'] === true || Number(r['redis_auth']) === 1,
      redisIdentity: r['redis_identity'] === null || r['redis_identity'] === undefined ? null : String(r['redis_identity']),
      startedAt: Number(r['started_at']),
      heartbeatAt: Number(r['heartbeat_at']),
      ageMs: Number(r['age_ms']),
    }));
  }

  /** Postgres binds booleans; better-sqlite3 takes 0/1. */
  private bool(value: boolean): boolean | number {
    return this.db.dialect === 'postgres' ? value : value ? 1 : 0;
  }
}
