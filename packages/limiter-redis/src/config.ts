/** The adapter's configuration: what an operator sets (REDIS_*), its defaults and their validation. */
export interface RedisCounterConfig {
  /** `redis[s]://[[user][:password]@]host[:port][/db]` (REDIS_URL). Exactly one of `url` and `clusterNodes`. */
  url?: string;
  /**
   * Seed nodes of a Redis Cluster (REDIS_CLUSTER_NODES), each `redis[s]://[[user][:password]@]host:port`:
   * node-redis's cluster client discovers the rest. Every key of one scope shares one hash tag.
   */
  clusterNodes?: readonly string[];
  /**
   * Replicas a credential change's begin must reach before it is confirmed (REDIS_MIN_REPLICAS_ACKED):
   * WAIT for them within `replicaAckTimeoutMs`, else the begin rejects (the change answers 503 and
   * writes nothing). Default: 1 where the primary has a replica, else 0: on a cluster, any replica
   * the cluster lists for the primary (CLUSTER NODES: link up or cut, failed or not); on one Redis,
   * the replicas the primary reports (ROLE) at that moment. 0 never waits.
   */
  minReplicasAcked?: number;
  /**
   * WAIT's bound in ms. Default: 60 % of the core's bound on one fence call (the greater of 250 ms
   * and `timeoutMs`), so ROLE, the script and WAIT fit in it: 150 ms with the defaults.
   */
  replicaAckTimeoutMs?: number;
  /** Bound on one hit() in ms (REDIS_TIMEOUT_MS, C-54); after it hit() rejects. Default 50. */
  timeoutMs?: number;
  /** The namespace put in front of every key name the core gives: `<keyPrefix>:<name>` (e.g. `rl:{org:<id>}:<windowStartMs>`). Default 'rl'. */
  keyPrefix?: string;
  /**
   * Credential freshness: how long a change marker lives, and how long nothing counts as
   * settled after the data was found gone (FLUSHALL, a restart). Must stay well above the store's
   * transaction bound (2 s). Default 10 s.
   */
  changeBoundMs?: number;
}

export const DEFAULT_CHANGE_BOUND_MS = 10_000;
/** The core's floor on one fence call (begin or end of a credential change), ms. */
const FENCE_BOUND_FLOOR_MS = 250;
export function defaultReplicaAckTimeoutMs(timeoutMs: number): number {
  return Math.floor(0.6 * Math.max(FENCE_BOUND_FLOOR_MS, timeoutMs));
}
/** REDIS_MIN_REPLICAS_ACKED unset waits for at most this many replicas (of those the primary reports). */
export const DEFAULT_MAX_REPLICAS_WAITED = 1;

export const DEFAULT_REDIS_TIMEOUT_MS = 50;
export const DEFAULT_KEY_PREFIX = 'rl';

/** A configuration checked and with its defaults applied; what the counter and the freshness run on. */
export interface RedisCounterSettings {
  readonly timeoutMs: number;
  readonly keyPrefix: string;
  readonly changeBoundMs: number;
  readonly minReplicasAcked: number | undefined;
  readonly replicaAckTimeoutMs: number;
}

/** Applies the defaults; throws a RangeError naming the first invalid option. */
export function resolveSettings(config: RedisCounterConfig): RedisCounterSettings {
  const timeoutMs = config.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(`timeoutMs must be a positive number of milliseconds, got ${String(config.timeoutMs)}`);
  }
  const keyPrefix = config.keyPrefix ?? DEFAULT_KEY_PREFIX;
  const changeBoundMs = config.changeBoundMs ?? DEFAULT_CHANGE_BOUND_MS;
  if (!Number.isFinite(changeBoundMs) || changeBoundMs <= 0) {
    throw new RangeError(`changeBoundMs must be a positive number of milliseconds, got ${String(config.changeBoundMs)}`);
  }
  const min = config.minReplicasAcked;
  if (min !== undefined && (!Number.isInteger(min) || min < 0)) {
    throw new RangeError(`minReplicasAcked must be a whole number of replicas, got ${String(min)}`);
  }
  const replicaAckTimeoutMs = config.replicaAckTimeoutMs ?? defaultReplicaAckTimeoutMs(timeoutMs);
  if (!Number.isInteger(replicaAckTimeoutMs) || replicaAckTimeoutMs <= 0) {
    throw new RangeError(`replicaAckTimeoutMs must be a positive whole number of milliseconds, got ${String(config.replicaAckTimeoutMs)}`);
  }
  const nodes = config.clusterNodes;
  if ((config.url === undefined) === (nodes === undefined || nodes.length === 0)) {
    throw new RangeError('exactly one of url and clusterNodes must be given');
  }
  return { timeoutMs, keyPrefix, changeBoundMs, minReplicasAcked: min, replicaAckTimeoutMs };
}
