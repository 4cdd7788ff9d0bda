/**
 * The connection to a Redis Cluster (REDIS_CLUSTER_NODES): the cluster client with the options of
 * every connection, the seed URL's credentials for the discovered nodes, rediscovery until close(),
 * and the watch that follows a frozen primary to its promoted replica.
 */
import { createCluster } from 'redis';
import { CONNECTION_OPTIONS, reconnectDelayMs, type Connection } from './connection.js';
import { SCRIPTS } from './scripts.js';

/** A cluster's node is asked for the slots again this soon after its connection dropped (a failover). */
const CLUSTER_TOPOLOGY_REFRESH_MS = 250;

function makeCluster(urls: readonly string[]) {
  return createCluster({
    rootNodes: urls.map((url) => ({ url })),
    // Credentials and TLS of the seed URLs apply to the discovered nodes too.
    defaults: { ...CONNECTION_OPTIONS, ...credentialsOf(urls[0]!) },
    scripts: SCRIPTS,
    commandOptions: { timeout: 0 },
    topologyRefreshOnReconnectionAttemptStrategy: CLUSTER_TOPOLOGY_REFRESH_MS,
  });
}

/** The user, password and TLS of a seed URL, for the cluster's discovered nodes. */
function credentialsOf(url: string): { username?: string; password?: string; socket?: { tls: true; connectTimeout: number; reconnectStrategy: (retries: number) => number } } {
  const u = new URL(url);
  return {
    ...(u.username !== '' ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password !== '' ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.protocol === 'rediss:' ? { socket: { ...CONNECTION_OPTIONS.socket, tls: true as const } } : {}),
  };
}

/**
 * How often a cluster connection PINGs each primary it routes to. A PING still unanswered at the next
 * round is a timeout: another node is asked for the slot map, at most once per round.
 */
const CLUSTER_WATCH_INTERVAL_MS = 1_000;

type Cluster = ReturnType<typeof makeCluster>;

/** The primaries' `host:port` in a CLUSTER SLOTS reply ([start, end, [host, port, id], replicas…] per range). */
function primariesOf(slots: unknown): Set<string> {
  const out = new Set<string>();
  if (!Array.isArray(slots)) return out;
  for (const range of slots) {
    const primary: unknown = Array.isArray(range) ? range[2] : undefined;
    if (Array.isArray(primary)) out.add(`${String(primary[0])}:${String(primary[1])}`);
  }
  return out;
}

/** A seed URL for `address` (host:port) with the user, password and TLS of `like`. */
function seedFor(address: string, like: string): string {
  const url = new URL(like);
  const colon = address.lastIndexOf(':');
  url.hostname = address.slice(0, colon);
  url.port = address.slice(colon + 1);
  url.pathname = '';
  return url.toString();
}

/**
 * Follows a frozen or blackholed primary to its promoted replica. Such a node keeps its TCP
 * connection open: no MOVED comes back and no reconnection starts, so the cluster client never asks
 * for the slots again, and every command routed to it waits until it wakes. Once per
 * CLUSTER_WATCH_INTERVAL_MS every primary's connection gets one PING (none while its last is
 * unanswered). A primary whose PING of the round before is still unanswered is a timeout: a primary
 * that answers is asked for the slot map (CLUSTER SLOTS, on its existing connection). Until the
 * cluster promotes a replica that map still names the frozen node, and nothing changes; once it no
 * longer does, `replace` is called with the primaries that answer, and the connection starts a new
 * cluster client from them (the frozen node's connection is dropped with the old client, and what
 * waited on it rejects). Nothing is added per request: a few PINGs a second per connection,
 * whatever the load.
 */
function watchPrimaries(current: () => Cluster, replace: (seeds: readonly string[]) => Promise<void>): () => void {
  const unanswered = new WeakSet<object>();
  let replacing = false;
  const timer = setInterval(() => {
    const cluster = current();
    if (!cluster.isReady || replacing) return;
    const stuck = new Set<string>();
    const answering: NonNullable<Cluster['masters'][number]['client']>[] = [];
    for (const node of cluster.masters) {
      const client = node.client;
      if (client === undefined || !client.isReady) continue;
      if (unanswered.has(client)) {
        stuck.add(node.address);
        continue;
      }
      answering.push(client);
      unanswered.add(client);
      client.sendCommand(['PING']).then(
        () => unanswered.delete(client),
        () => unanswered.delete(client),
      );
    }
    const asked = answering[0];
    if (stuck.size === 0 || asked === undefined) return;
    replacing = true;
    asked
      .sendCommand(['CLUSTER', 'SLOTS'])
      .then(async (slots) => {
        const primaries = primariesOf(slots);
        if (primaries.size === 0 || [...stuck].every((address) => primaries.has(address))) return;
        await replace([...primaries].filter((address) => !stuck.has(address)));
      })
      .catch(() => undefined)
      .finally(() => {
        replacing = false;
      });
  }, CLUSTER_WATCH_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * A cluster: the client connects to each node as it learns the slots, and every node's connection
 * reconnects by itself; only the discovery itself (no seed node answering) gives up, so it is
 * retried here until close(). 'ready' is the end of a discovery. A primary that stops answering
 * without dropping its connection is followed to its promoted replica (watchPrimaries): the client
 * is then replaced by a new one discovered from the primaries that answer.
 */
export function clusterConnection(urls: readonly string[]): Connection {
  let cluster = makeCluster(urls);
  const ready = new Set<() => void>();
  const errorListeners: ((arg?: unknown) => void)[] = [];
  let closed = false;
  const announceReady = (): void => {
    for (const listener of [...ready]) listener();
  };
  const listen = (c: Cluster): void => {
    c.on('connect', () => {
      if (c === cluster) announceReady();
    });
    for (const listener of errorListeners) c.on('error', listener);
  };
  listen(cluster);
  const stopWatching = watchPrimaries(
    () => cluster,
    async (seeds) => {
      const fresh = makeCluster(seeds.map((address) => seedFor(address, urls[0]!)));
      listen(fresh);
      try {
        await fresh.connect();
      } catch {
        fresh.destroy();
        return;
      }
      if (closed) {
        fresh.destroy();
        return;
      }
      const old = cluster;
      cluster = fresh;
      old.destroy();
      announceReady();
    },
  );
  return {
    isCluster: true,
    get isReady() {
      return !closed && cluster.isReady;
    },
    get isOpen() {
      return cluster.isOpen;
    },
    hit: (key, ttlMs, deadlineMs, n) => cluster.hit(key, ttlMs, deadlineMs, n),
    freshness: (keys, args) => cluster.freshness(keys, args),
    guardedHit: (keys, args) => cluster.guardedHit(keys, args),
    guardedFreshness: (keys, args) => cluster.guardedFreshness(keys, args),
    beginChange: (keys, args) => cluster.beginChange(keys, args),
    endChange: (keys, args) => cluster.endChange(keys, args),
    // A key's command goes straight to the connection of the slot's primary, the one its scripts
    // use: the cluster client's routing policies would send WAIT to every shard.
    command: async (key, args) => (key === undefined ? cluster.sendCommand(undefined, true, [...args]) : (await cluster.getNodeClientForKey(key, false)).sendCommand([...args])),
    on: (event, listener) => {
      if (event === 'ready') ready.add(listener);
      else {
        errorListeners.push(listener);
        cluster.on('error', listener);
      }
    },
    off: (_event, listener) => void ready.delete(listener),
    connect: async () => {
      for (let retries = 0; !closed; retries++) {
        try {
          await cluster.connect();
          return;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, reconnectDelayMs(retries)));
        }
      }
    },
    close: () => {
      closed = true;
      stopWatching();
      return cluster.isOpen ? cluster.close() : Promise.resolve();
    },
    destroy: () => {
      closed = true;
      stopWatching();
      cluster.destroy();
    },
  };
}
