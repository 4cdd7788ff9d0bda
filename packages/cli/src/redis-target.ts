/**
 * The Redis an instance or a command counts and fences in, as one string: what AppConfig.redisUrl
 * holds and what the instance registry records (redis_location). Either a REDIS_URL, or for a Redis
 * Cluster `cluster:` followed by the comma-separated seed node URLs of REDIS_CLUSTER_NODES (core's
 * redis-location.ts reads both forms).
 */
import { clusterNodesOf } from '@cos/core';

export { clusterRef, redisVariable } from '@cos/core';

/** How limiter-redis connects to the reference: one URL or a cluster's seed nodes. */
export function counterTarget(ref: string): { url: string } | { clusterNodes: string[] } {
  const nodes = clusterNodesOf(ref);
  return nodes === null ? { url: ref } : { clusterNodes: nodes };
}
