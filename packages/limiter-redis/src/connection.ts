/**
 * The adapter's connections to Redis: the shape the counter and the freshness use, plain or to a
 * cluster (cluster-connection.ts), the options of every connection (no offline queue, reconnecting
 * forever), and the connection to one Redis.
 */
import { createClient } from 'redis';
import { SCRIPTS, type CheckReply } from './scripts.js';

/** Reconnect attempts back off exponentially up to this delay and never give up. */
export const REDIS_MAX_RECONNECT_DELAY_MS = 1_000;
export const CONNECT_TIMEOUT_MS = 1_000;
/** Bounds the commands waiting on one socket (a frozen Redis answers none of them). */
export const MAX_PENDING_COMMANDS = 10_000;

/** Capped exponential backoff with a little jitter; a number means "retry", so it never gives up. */
export function reconnectDelayMs(retries: number): number {
  const backoff = Math.min(50 * 2 ** Math.min(retries, 10), REDIS_MAX_RECONNECT_DELAY_MS);
  return backoff + Math.floor(Math.random() * 50);
}

/** Options of every connection, plain or to a cluster's node. */
export const CONNECTION_OPTIONS = {
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
  /** HIT with key windows (scripts.ts GUARDED_HIT_SCRIPT): -1 when late, else the counts. */
  guardedHit(keys: readonly string[], args: readonly string[]): Promise<readonly number[] | number>;
  /** The freshness check with key windows (scripts.ts GUARDED_CHECK_SCRIPT). */
  guardedFreshness(keys: readonly string[], args: readonly string[]): Promise<CheckReply>;
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
    guardedHit: (keys, args) => client.guardedHit(keys, args),
    guardedFreshness: (keys, args) => client.guardedFreshness(keys, args),
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
