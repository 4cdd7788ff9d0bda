/**
 * The adapter's connections to Redis, plain or to a cluster: their options (no offline queue,
 * reconnecting forever), the shape the counter and the freshness use, and the link that owns both
 * connections (the hot path's and the credential changes'), their readiness and Redis's clock offset.
 */
import { createClient, createCluster } from 'redis';
import { RedisCounterError, errorMessage } from './errors.js';
import { RespConnection } from './resp.js';
import { SCRIPTS, type CheckReply } from './scripts.js';

/** Reconnect attempts back off exponentially up to this delay and never give up. */
export const REDIS_MAX_RECONNECT_DELAY_MS = 1_000;
const CONNECT_TIMEOUT_MS = 1_000;
/** TIME round trips measured on each connect; the shortest one gives the clock offset. */
const CLOCK_SAMPLES = 5;
/** Bounds the commands waiting on one socket (a frozen Redis answers none of them). */
const MAX_PENDING_COMMANDS = 10_000;
/** close() waits this long for in-flight replies before dropping the socket. */
const CLOSE_GRACE_MS = 1_000;


/** Capped exponential backoff with a little jitter; a number means "retry", so it never gives up. */
export function reconnectDelayMs(retries: number): number {
  const backoff = Math.min(50 * 2 ** Math.min(retries, 10), REDIS_MAX_RECONNECT_DELAY_MS);
  return backoff + Math.floor(Math.random() * 50);
}

/** Options of every connection, plain or to a cluster's node. */
const CONNECTION_OPTIONS = {
  // Never queue a command behind a connection that is not ready: reject it at once (C-54).
  disableOfflineQueue: true,
  commandsQueueMaxLength: MAX_PENDING_COMMANDS,
  socket: {
    connectTimeout: CONNECT_TIMEOUT_MS,
    reconnectStrategy: (retries: number) => reconnectDelayMs(retries),
  },
} as const;

function makeClient(url: string) {
  return createClient({
    url,
    scripts: SCRIPTS,
    ...CONNECTION_OPTIONS,
    // No client-side per-command timeout (node-redis 6 sets one by default): it costs an
    // AbortSignal.timeout per command, the dearest part of a hit; hit() bounds every call itself.
    commandOptions: { timeout: 0 },
  });
}

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
 * What the counter needs of a connection, plain or to a cluster: the scripts (a cluster routes each
 * by its first key) and single commands routed by a key (`key` undefined: any node).
 */
export interface Connection {
  /** A Redis Cluster's client (REDIS_CLUSTER_NODES), not one Redis's. */
  readonly isCluster: boolean;
  readonly isReady: boolean;
  readonly isOpen: boolean;
  hit(key: string, ttlMs: number, deadlineMs: number, n: number): Promise<number>;
  freshness(keys: readonly string[], args: readonly string[]): Promise<CheckReply>;
  beginChange(keys: readonly string[], args: readonly string[]): Promise<number>;
  endChange(keys: readonly string[], args: readonly string[]): Promise<number>;
  command(key: string | undefined, args: readonly string[]): Promise<unknown>;
  on(event: 'error' | 'ready', listener: (arg?: unknown) => void): void;
  off(event: 'ready', listener: () => void): void;
  connect(): Promise<void>;
  close(): Promise<void>;
  destroy(): void;
}

export function plainConnection(url: string): Connection {
  const client = makeClient(url);
  return {
    isCluster: false,
    get isReady() {
      return client.isReady;
    },
    get isOpen() {
      return client.isOpen;
    },
    hit: (key, ttlMs, deadlineMs, n) => client.hit(key, ttlMs, deadlineMs, n),
    freshness: (keys, args) => client.freshness(keys, args),
    beginChange: (keys, args) => client.beginChange(keys, args),
    endChange: (keys, args) => client.endChange(keys, args),
    command: (_key, args) => client.sendCommand([...args]),
    on: (event, listener) => void client.on(event, listener),
    off: (event, listener) => void client.off(event, listener),
    // Background connect: it resolves once Redis answers (however late) and rejects only on close().
    connect: () => client.connect().then(() => undefined),
    close: () => client.close(),
    destroy: () => client.destroy(),
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

/** host:port only, never credentials, for log lines. */
function describeTarget(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '6379'}`;
  } catch {
    return 'redis';
  }
}


/** Closes a connection, waiting at most CLOSE_GRACE_MS for in-flight replies before dropping it. */
async function closeConnection(connection: Connection): Promise<void> {
  if (!connection.isOpen) {
    try {
      connection.destroy(); // stops a connect still retrying
    } catch {
      // never opened
    }
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const graceful = await Promise.race([
    connection.close().then(
      () => true,
      () => false,
    ),
    new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), CLOSE_GRACE_MS);
    }),
  ]);
  clearTimeout(timer);
  if (!graceful) connection.destroy();
}

/**
 * The two connections of one adapter and what they share. The hot path's (`client`: hits and
 * freshness checks; on one Redis a RespConnection of this adapter's own, on a cluster node-redis's) and the credential changes' (`changes`: their WAIT blocks the connection it is
 * sent on until the replicas acknowledged, or its timeout, so it must not be the hot path's).
 * Both connect in the background and reconnect by themselves; a connection error is only
 * remembered (as part of the not-connected rejection) until the connection is ready again.
 */
export class RedisLink {
  readonly client: Connection;
  readonly changes: Connection;
  /** host:port (or `cluster host:port,…`), never credentials: what failure messages name. */
  readonly target: string;
  readonly #keyPrefix: string;
  closed = false;
  /** Why the connection last failed (no credentials), until it is ready again. */
  #connectionError: string | undefined;
  /** Redis's clock minus this process's (ms), measured at each connect: deadlines are sent on Redis's clock. */
  clockOffsetMs = 0;

  constructor(target: { url?: string | undefined; clusterNodes?: readonly string[] | undefined }, keyPrefix: string) {
    this.#keyPrefix = keyPrefix;
    const nodes = target.clusterNodes;
    if (nodes !== undefined && nodes.length > 0) {
      this.target = `cluster ${nodes.map(describeTarget).join(',')}`;
      this.client = clusterConnection(nodes);
      this.changes = clusterConnection(nodes);
    } else {
      this.target = describeTarget(target.url!);
      // The hot path's own RESP connection writes a batch in the turn it is sent (resp.ts).
      this.client = new RespConnection(target.url!, { connectTimeoutMs: CONNECT_TIMEOUT_MS, maxPending: MAX_PENDING_COMMANDS, reconnectDelayMs });
      this.changes = plainConnection(target.url!);
    }
    // Without an 'error' listener the client would throw. A connection error is only remembered:
    // the client reconnects by itself, and meanwhile every call rejects at once, naming it.
    this.client.on('error', (err: unknown) => {
      this.#connectionError = errorMessage(err);
    });
    this.changes.on('error', () => undefined);
    this.client.on('ready', () => this.#onReady(this.client));
    this.changes.on('ready', () => this.#onReady(this.changes));
    this.client.connect().catch(() => undefined);
    this.changes.connect().catch(() => undefined);
  }

  /** The Redis key of a key name the core gave: the name behind the prefix. */
  keyFor(name: string): string {
    return `${this.#keyPrefix}:${name}`;
  }

  /** True while the hot path's connection is up and the link not closed. */
  get isReady(): boolean {
    return !this.closed && this.client.isReady;
  }

  /** Resolves true once both connections are up, or false after `timeoutMs` (never rejects). */
  whenReady(timeoutMs: number): Promise<boolean> {
    const up = (): boolean => this.isReady && this.changes.isReady;
    if (up()) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        this.client.off('ready', onReady);
        this.changes.off('ready', onReady);
        resolve(ok);
      };
      const onReady = (): void => {
        if (up()) done(true);
      };
      const timer = setTimeout(() => done(up()), timeoutMs);
      this.client.on('ready', onReady);
      this.changes.on('ready', onReady);
    });
  }

  notConnected(): RedisCounterError {
    const cause = this.#connectionError;
    return new RedisCounterError('not-connected', `redis rate counter: not connected to ${this.target}${cause === undefined ? '' : ` (${cause})`}`);
  }

  /** Why a call cannot be sent now (closed, or the hot path's connection down), or null. */
  readyError(): RedisCounterError | null {
    if (this.closed) return new RedisCounterError('closed', 'redis rate counter is closed');
    if (!this.client.isReady) return this.notConnected();
    return null;
  }

  /** Stops reconnecting and closes both connections (waits at most 1 s for in-flight replies). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([closeConnection(this.client), closeConnection(this.changes)]);
  }

  #onReady(connection: Connection): void {
    if (this.closed) {
      // a connect that was already under way when close() ran: do not keep its socket
      connection.destroy();
      return;
    }
    if (connection !== this.client) return;
    this.#connectionError = undefined;
    void measureClockOffset(this.client).then((offset) => {
      if (offset !== undefined) this.clockOffsetMs = offset;
    });
  }
}

/**
 * Redis TIME against this process's clock (hosts' clocks may differ), as the lower bound of what
 * one sample can prove: Redis read its clock somewhere between sending and receiving, so its
 * offset is at least `redis - after`. A deadline computed with that bound is never later on Redis's
 * clock than the caller's own, so a hit that waited past its timeout is never counted.
 * The midpoint of one sample would be off by half its round trip, letting hits that had already
 * failed open count that much later. Of a few samples the one with the
 * shortest round trip is kept, so an in-time hit is refused (answered as failed open, uncounted)
 * only within that round trip of its deadline. Undefined when no sample answered (the last offset
 * is kept; the next connect measures again).
 */
async function measureClockOffset(connection: Connection): Promise<number | undefined> {
  let best: { rtt: number; offset: number } | undefined;
  for (let i = 0; i < CLOCK_SAMPLES; i++) {
    try {
      const before = Date.now(); // the clock deadlines are computed with
      const reply = (await connection.command(undefined, ['TIME'])) as [string, string];
      const after = Date.now();
      const redisMs = Number(reply[0]) * 1000 + Math.floor(Number(reply[1]) / 1000);
      if (!Number.isFinite(redisMs)) continue;
      const rtt = after - before;
      if (best === undefined || rtt < best.rtt) best = { rtt, offset: redisMs - after };
    } catch {
      break;
    }
  }
  return best?.offset;
}
