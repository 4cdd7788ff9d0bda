/**
 * The Redis an instance or a command counts and fences in, as one string: what AppConfig.redisUrl
 * holds and what the instance registry records (redis_location). Either a REDIS_URL, or for a Redis
 * Cluster `cluster:` followed by the comma-separated seed node URLs of REDIS_CLUSTER_NODES.
 */
const CLUSTER_PREFIX = 'cluster:';

/** The reference of a cluster given by its seed nodes. */
export function clusterRef(nodes: readonly string[]): string {
  return `${CLUSTER_PREFIX}${nodes.join(',')}`;
}

/** The seed node URLs of a cluster reference, or null for a plain REDIS_URL. */
export function clusterNodesOf(ref: string): string[] | null {
  return ref.startsWith(CLUSTER_PREFIX) ? ref.slice(CLUSTER_PREFIX.length).split(',') : null;
}

/** How limiter-redis connects to the reference: one URL or a cluster's seed nodes. */
export function counterTarget(ref: string): { url: string } | { clusterNodes: string[] } {
  const nodes = clusterNodesOf(ref);
  return nodes === null ? { url: ref } : { clusterNodes: nodes };
}

/** The variable an operator sets to name such a Redis (for messages). */
export function redisVariable(ref: string | null): 'REDIS_URL' | 'REDIS_CLUSTER_NODES' {
  return ref !== null && clusterNodesOf(ref) !== null ? 'REDIS_CLUSTER_NODES' : 'REDIS_URL';
}
