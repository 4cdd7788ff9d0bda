/**
 * What a configured Redis target is, asked once of each node it names (INFO cluster): a Redis
 * Cluster node where one Redis was named (REDIS_URL), or a Redis without cluster support where a
 * cluster's seed nodes were (REDIS_CLUSTER_NODES). Either would start and then fail open on every
 * request of the organisations it cannot serve; the caller refuses to start instead. Its own short
 * connections, none of the counter's; credentials are sent as the counter sends them.
 */
import { createClient } from 'redis';
import { errorMessage } from './errors.js';

export type RedisTargetProbe =
  /** A node answered and the target is what it was named as (or INFO cluster was refused: nothing to tell). */
  | { readonly kind: 'ok' }
  /** No node answered within the bound (refused, unresolvable, timed out): `reason` without credentials. */
  | { readonly kind: 'unreachable'; readonly reason: string }
  /** `url` names a Redis Cluster node (`node`: host:port). */
  | { readonly kind: 'cluster-node'; readonly node: string }
  /** A seed of `clusterNodes` has cluster support disabled (`node`: host:port). */
  | { readonly kind: 'not-cluster'; readonly node: string };

/** A node's answer: 1 (cluster node), 0 (not), null (answered, but not INFO cluster), or why it did not answer. */
type NodeAnswer = { readonly clusterEnabled: 0 | 1 | null } | { readonly unreachable: string };

/** host:port of a URL, never its credentials. */
function hostPort(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '6379'}`;
  } catch {
    return 'redis';
  }
}

async function askNode(url: string, timeoutMs: number, credentialsOf: string): Promise<NodeAnswer> {
  const seed = new URL(url);
  const from = new URL(credentialsOf);
  // A cluster's seeds take the first seed's user, password and TLS, as the cluster client does.
  seed.username = from.username;
  seed.password = from.password;
  seed.protocol = from.protocol;
  const client = createClient({ url: seed.toString(), disableOfflineQueue: true, socket: { connectTimeout: timeoutMs, reconnectStrategy: false }, commandOptions: { timeout: timeoutMs } });
  let failure: unknown;
  client.on('error', (err: unknown) => (failure = err));
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
  try {
    const connected = await Promise.race([client.connect().then(() => 'connected' as const, (err: unknown) => err), bound]);
    if (connected === 'timeout') return { unreachable: `no answer within ${timeoutMs} ms` };
    if (connected !== 'connected') {
      // A Redis error reply (a wrong password, a missing permission) is an answer: not this check's concern.
      const message = errorMessage(connected ?? failure);
      return /^(ERR|WRONGPASS|NOAUTH|NOPERM|LOADING)\b/.test(message) ? { clusterEnabled: null } : { unreachable: message };
    }
    const info = await Promise.race([client.sendCommand(['INFO', 'cluster']).then(String, () => null), bound]);
    if (info === 'timeout') return { unreachable: `no answer within ${timeoutMs} ms` };
    const match = info === null ? null : /^cluster_enabled:([01])/m.exec(info);
    return { clusterEnabled: match === null ? null : match[1] === '1' ? 1 : 0 };
  } finally {
    clearTimeout(timer);
    client.destroy();
  }
}

/**
 * Asks every node `target` names (in parallel, each bounded by `timeoutMs`) what it is. A wrong
 * node wins over an unreachable one; 'unreachable' only when no node answered.
 */
export async function probeRedisTarget(target: { url?: string | undefined; clusterNodes?: readonly string[] | undefined }, timeoutMs: number): Promise<RedisTargetProbe> {
  const seeds = target.clusterNodes !== undefined && target.clusterNodes.length > 0 ? target.clusterNodes : null;
  const urls = seeds ?? [target.url!];
  const answers = await Promise.all(urls.map((url) => askNode(url, timeoutMs, urls[0]!)));
  for (const [i, answer] of answers.entries()) {
    if (!('clusterEnabled' in answer)) continue;
    if (seeds === null && answer.clusterEnabled === 1) return { kind: 'cluster-node', node: hostPort(urls[i]!) };
    if (seeds !== null && answer.clusterEnabled === 0) return { kind: 'not-cluster', node: hostPort(urls[i]!) };
  }
  if (answers.some((a) => 'clusterEnabled' in a)) return { kind: 'ok' };
  const reasons = [...new Set(answers.map((a) => ('unreachable' in a ? a.unreachable : '')))].join('; ');
  return { kind: 'unreachable', reason: reasons };
}
