/**
 * The Redis an instance or a command counts and fences in, as one string (a "reference"): what a
 * host's REDIS_URL holds and what the instance registry records (InstanceRecord.redisLocation).
 * Either a Redis URL, or for a Redis Cluster `cluster:` followed by the comma-separated seed node
 * URLs. A location is a reference without credentials, normalised so that two hosts naming one
 * Redis record the same string.
 */
const CLUSTER_PREFIX = 'cluster:';

/** The reference of a cluster given by its seed nodes. */
export function clusterRef(nodes: readonly string[]): string {
  return `${CLUSTER_PREFIX}${nodes.join(',')}`;
}

/** The seed node URLs of a cluster reference, or null for a plain Redis URL. */
export function clusterNodesOf(ref: string): string[] | null {
  return ref.startsWith(CLUSTER_PREFIX) ? ref.slice(CLUSTER_PREFIX.length).split(',') : null;
}

/** The variable an operator sets to name such a Redis (for messages). */
export function redisVariable(ref: string | null): 'REDIS_URL' | 'REDIS_CLUSTER_NODES' {
  return ref !== null && clusterNodesOf(ref) !== null ? 'REDIS_CLUSTER_NODES' : 'REDIS_URL';
}

/** Where a Redis is, without credentials: what the registry records and what is compared. */
export interface RedisLocation {
  /** `redis[s]://host:port/db` (lower-case host, default port 6379, default db 0). */
  readonly location: string;
  /** `host:port`, for messages. */
  readonly target: string;
  /** The URL carries a user name or a password. */
  readonly auth: boolean;
}

/**
 * The credential-free location of a Redis reference or of a recorded location. A cluster's is
 * `cluster:` and its seed nodes' locations, sorted; it is itself a reference a command can connect with.
 */
export function redisLocationOf(url: string): RedisLocation {
  const nodes = clusterNodesOf(url);
  if (nodes !== null) {
    const each = [...new Map(nodes.map((n) => redisLocationOf(n)).map((l) => [l.location, l])).values()].sort((a, b) => a.location.localeCompare(b.location));
    return { location: clusterRef(each.map((l) => l.location)), target: `cluster ${each.map((l) => l.target).join(',')}`, auth: each.some((l) => l.auth) };
  }
  const u = new URL(url);
  const scheme = u.protocol.replace(/:$/, '');
  const host = u.hostname.toLowerCase();
  const port = u.port === '' ? '6379' : u.port;
  const db = u.pathname.replace(/^\/+/, '').replace(/\/+$/, '') || '0';
  return { location: `${scheme}://${host}:${port}/${db}`, target: `${host}:${port}`, auth: u.username !== '' || u.password !== '' };
}

/**
 * Whether two locations name the same Redis: equal, or two clusters that share a seed node (seed
 * lists of one cluster may differ between instances and commands).
 */
export function sameRedis(a: string, b: string): boolean {
  if (a === b) return true;
  const [na, nb] = [clusterNodesOf(a), clusterNodesOf(b)];
  return na !== null && nb !== null && na.some((n) => nb.includes(n));
}
