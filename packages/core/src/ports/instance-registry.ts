/**
 * The instance registry: the shared record through which a credential change reaches every
 * instance that caches credentials, whoever makes it (access/instance-lease.ts and
 * access/command-fence.ts hold the protocol). A caching instance records itself with the Redis it
 * fences with (a "cache" row) and refreshes the row while it runs; an operator command records
 * each credential change it has in flight (a "writer" row) before it reads the live cache rows.
 *
 * Every age is measured by the registry's own clock (the database's, for the SQL registry), so the
 * hosts' clocks never meet: a row is live while that clock says its last heartbeat is less than
 * `liveMs` old.
 */

/** One registered caching instance as read back. */
export interface InstanceRecord {
  readonly instanceId: string;
  /** `redis[s]://host:port/db` (or `cluster:` and seed node locations), never credentials. */
  readonly redisLocation: string;
  /** The instance's REDIS_URL carries a user name or a password. */
  readonly redisAuth: boolean;
  /** The identity the instance read from its Redis; null when it recorded none. */
  readonly redisIdentity: string | null;
  /** Epoch ms, the registry's clock. */
  readonly startedAt: number;
  readonly heartbeatAt: number;
  /** How long ago the last heartbeat was, by the registry's clock when it was read (ms). */
  readonly ageMs: number;
}

/** What a caching instance records at each heartbeat. */
export interface InstanceRegistration {
  readonly instanceId: string;
  readonly redisLocation: string;
  readonly redisAuth: boolean;
  /** The identity read from that Redis; null or absent when it could not be read (the row keeps the one recorded before). */
  readonly redisIdentity?: string | null;
}

/** Rows whose heartbeat is older than this are deleted by prune() (they are long dead). */
export const REGISTRY_PRUNE_AFTER_MS = 24 * 60 * 60 * 1000;

export interface InstanceRegistry {
  /**
   * Records the caching instance, or refreshes its heartbeat (the row is re-created if it was
   * removed; its start is kept otherwise). An identity of null keeps the one recorded before.
   */
  heartbeat(registration: InstanceRegistration): Promise<void>;
  /** Records a credential change in flight (an operator command's), until endWrite(). */
  beginWrite(writeId: string): Promise<void>;
  endWrite(writeId: string): Promise<void>;
  /** How many credential changes of operator commands are in flight (recorded less than `liveMs` ago). */
  writesInFlight(liveMs: number): Promise<number>;
  /** Deletes rows whose heartbeat is older than `olderThanMs` (default REGISTRY_PRUNE_AFTER_MS): dead instances and commands, never live ones. */
  prune(olderThanMs?: number): Promise<void>;
  /** Removes the instance's row (a clean shutdown); a writer row is never removed here. */
  remove(instanceId: string): Promise<void>;
  /** The caching instances whose last heartbeat is less than `liveMs` old, oldest start first (then by id). */
  live(liveMs: number): Promise<InstanceRecord[]>;
}
