import { randomBytes } from 'node:crypto';
import type { CredentialFreshness, FreshnessCheck, FreshnessKeys, FreshnessReply, RateCounter } from '@cos/core';
import { createClient, createCluster, defineScript, type CommandParser, type RedisArgument } from 'redis';

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
   * writes nothing). Default: the number of replicas the primary reports (ROLE) at that moment,
   * capped at 1; 0 never waits.
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
/** Reconnect attempts back off exponentially up to this delay and never give up. */
export const REDIS_MAX_RECONNECT_DELAY_MS = 1_000;
const CONNECT_TIMEOUT_MS = 1_000;
/** TIME round trips measured on each connect; the shortest one gives the clock offset. */
const CLOCK_SAMPLES = 5;
/** Bounds the commands waiting on one socket (a frozen Redis answers none of them). */
const MAX_PENDING_COMMANDS = 10_000;
/** close() waits this long for in-flight replies before dropping the socket. */
const CLOSE_GRACE_MS = 1_000;

export type RedisCounterFailure = 'not-connected' | 'timeout' | 'closed' | 'command-failed' | 'expired' | 'not-replicated';

/**
 * Why a hit() was rejected. The core's RateLimiter turns any rejection into its fail-open decision
 * and logs the counter's health (C-54); the message, which names host:port and never credentials,
 * is the `reason` of its warning.
 */
export class RedisCounterError extends Error {
  override readonly name = 'RedisCounterError';
  constructor(
    readonly reason: RedisCounterFailure,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * The only Redis command the counter sends: INCR the window's key and, on the first hit of the
 * window (count == 1), give it a TTL in milliseconds. One atomic script, so a key never lives
 * without its TTL. Defined with `defineScript`, the client sends EVALSHA and falls back to EVAL
 * when Redis answers NOSCRIPT (after a restart or SCRIPT FLUSH), which also re-caches it.
 *
 * The caller's deadline (ARGV[2], absolute epoch ms on Redis's clock) travels with the call: a hit
 * that reaches Redis after its caller stopped waiting (a frozen Redis wakes up to a queue of them)
 * counts nothing and returns -1. Fail-open requests are thereby "allowed without being counted"
 * (operations.md), instead of filling the window once Redis answers again.
 */
const EXPIRED = -1;
const HIT_SCRIPT = defineScript({
  SCRIPT: [
    "local now = redis.call('TIME')",
    // At the deadline's own millisecond the caller's timer may already have fired (a thaw right after
    // it was served in that millisecond and counted a failed-open hit): that is late too.
    'if tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) >= tonumber(ARGV[2]) then return -1 end',
    "local count = redis.call('INCR', KEYS[1])",
    "if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end",
    'return count',
  ].join('\n'),
  NUMBER_OF_KEYS: 1,
  parseCommand(parser: CommandParser, key: RedisArgument, ttlMs: number, deadlineMs: number) {
    parser.pushKey(key);
    parser.push(String(ttlMs));
    parser.push(String(deadlineMs));
  },
  // The script returns a Redis integer; the client maps it to a JavaScript number.
  transformReply: (reply: unknown): number => Number(reply),
});

/**
 * Credential freshness (the CredentialFreshness port), under the key names the core gives
 * (counter-keys.ts), behind the prefix. Per organisation, next to its counters (same hash tag):
 * `<prefix>:{org:<id>}:cc:token` (the current token, random, never reused) and
 * `<prefix>:{org:<id>}:cc:changes` (a sorted set of changes in progress, scored by their expiry on
 * Redis's clock). Per hash slot of the organisation's tag (so a cluster keeps them on the
 * organisation's node, and a resharding moves them with it): `<prefix>:{<slot tag>}:cc:alive`
 * (absent: the slot's data is gone, or was never there) and `<prefix>:{<slot tag>}:cc:unsettled`
 * (set for the change bound when `alive` was found missing: markers of changes in flight may have
 * been lost with it). Nothing is global: every script touches one slot. Every script starts with
 * that check, so a FLUSHALL, a restart without persistence or a slot served by a node that never
 * held its data is noticed by the first call after it.
 */
const NOT_COUNTED = -2;
const ALIVE_CHECK = [
  'if redis.call(\'EXISTS\', KEYS[4]) == 0 then',
  "  redis.call('SET', KEYS[4], '1')",
  "  redis.call('SET', KEYS[5], '1', 'PX', ARGV[6])",
  'end',
];
type CheckReply = readonly [number, string, number, number] | number;
const REDIS_NOW = ["local now = redis.call('TIME')", 'now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)'];
/** A freshness script: five keys and six arguments, as the caller lists them. */
function freshnessScript<R>(lines: readonly string[], transformReply: (reply: unknown) => R) {
  return defineScript({
    SCRIPT: lines.join('\n'),
    NUMBER_OF_KEYS: 5,
    parseCommand(parser: CommandParser, keys: readonly RedisArgument[], args: readonly RedisArgument[]) {
      for (const k of keys) parser.pushKey(k);
      for (const a of args) parser.push(a);
    },
    transformReply,
  });
}
const CHECK_SCRIPT = freshnessScript(
  // KEYS: counter, token, changes, alive, unsettled. ARGV: ttlMs, deadlineMs, tag, mode (a|f|n), new token, bound.
  [
    ...REDIS_NOW,
    'if now >= tonumber(ARGV[2]) then return -1 end',
    ...ALIVE_CHECK,
    "local token = redis.call('GET', KEYS[2])",
    "if not token then token = ARGV[5]; redis.call('SET', KEYS[2], token) end",
    "local settled = redis.call('EXISTS', KEYS[5]) == 0 and redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') == 0",
    'local fresh = settled and token == ARGV[3]',
    `local count = ${NOT_COUNTED}`,
    "if ARGV[4] == 'a' or (ARGV[4] == 'f' and fresh) then",
    "  count = redis.call('INCR', KEYS[1])",
    "  if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end",
    'end',
    'return {count, token, settled and 1 or 0, fresh and 1 or 0}',
  ],
  (reply: unknown): CheckReply => reply as CheckReply,
);
const BEGIN_SCRIPT = freshnessScript(
  // KEYS: token, changes, (unused), alive, unsettled. ARGV: change id, new token, (unused), (unused), (unused), bound.
  [
    ...REDIS_NOW,
    ...ALIVE_CHECK,
    "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)",
    "redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), ARGV[1])",
    "redis.call('PEXPIRE', KEYS[2], ARGV[6])",
    "redis.call('SET', KEYS[1], ARGV[2])",
    'return 1',
  ],
  Number,
);
// Same keys and arguments as BEGIN_SCRIPT.
const END_SCRIPT = freshnessScript([...ALIVE_CHECK, "redis.call('SET', KEYS[1], ARGV[2])", "redis.call('ZREM', KEYS[2], ARGV[1])", 'return 1'], Number);
const MODE = { always: 'a', 'if-fresh': 'f', never: 'n' } as const;

/** SHA1 of each credential-freshness script (EVALSHA; what Redis's INFO commandstats and SLOWLOG show). */
export const FRESHNESS_SCRIPT_SHA1 = Object.freeze({ check: CHECK_SCRIPT.SHA1, beginChange: BEGIN_SCRIPT.SHA1, endChange: END_SCRIPT.SHA1 });

/** Capped exponential backoff with a little jitter; a number means "retry", so it never gives up. */
export function reconnectDelayMs(retries: number): number {
  const backoff = Math.min(50 * 2 ** Math.min(retries, 10), REDIS_MAX_RECONNECT_DELAY_MS);
  return backoff + Math.floor(Math.random() * 50);
}

const SCRIPTS = { hit: HIT_SCRIPT, freshness: CHECK_SCRIPT, beginChange: BEGIN_SCRIPT, endChange: END_SCRIPT };

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
interface Connection {
  readonly isReady: boolean;
  readonly isOpen: boolean;
  hit(key: string, ttlMs: number, deadlineMs: number): Promise<number>;
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

function plainConnection(url: string): Connection {
  const client = makeClient(url);
  return {
    get isReady() {
      return client.isReady;
    },
    get isOpen() {
      return client.isOpen;
    },
    hit: (key, ttlMs, deadlineMs) => client.hit(key, ttlMs, deadlineMs),
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
 * A cluster: the client connects to each node as it learns the slots, and every node's connection
 * reconnects by itself; only the discovery itself (no seed node answering) gives up, so it is
 * retried here until close(). 'ready' is the end of a discovery.
 */
function clusterConnection(urls: readonly string[]): Connection {
  const cluster = makeCluster(urls);
  const ready = new Set<() => void>();
  let closed = false;
  cluster.on('connect', () => {
    for (const listener of [...ready]) listener();
  });
  return {
    get isReady() {
      return !closed && cluster.isReady;
    },
    get isOpen() {
      return cluster.isOpen;
    },
    hit: (key, ttlMs, deadlineMs) => cluster.hit(key, ttlMs, deadlineMs),
    freshness: (keys, args) => cluster.freshness(keys, args),
    beginChange: (keys, args) => cluster.beginChange(keys, args),
    endChange: (keys, args) => cluster.endChange(keys, args),
    // A key's command goes straight to the connection of the slot's primary, the one its scripts
    // use: the cluster client's routing policies would send WAIT to every shard.
    command: async (key, args) => (key === undefined ? cluster.sendCommand(undefined, true, [...args]) : (await cluster.getNodeClientForKey(key, false)).sendCommand([...args])),
    on: (event, listener) => {
      if (event === 'ready') ready.add(listener);
      else cluster.on('error', listener);
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
      return cluster.isOpen ? cluster.close() : Promise.resolve();
    },
    destroy: () => {
      closed = true;
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

function errorMessage(err: unknown): string {
  if (err instanceof Error) {
    // node's AggregateError (e.g. ECONNREFUSED on ::1 and 127.0.0.1) carries an empty message
    const code = (err as { code?: unknown }).code;
    return err.message || (typeof code === 'string' ? code : err.name);
  }
  return String(err);
}

/**
 * The core's RateCounter port on Redis (C-55): one counter per scope and UTC-minute window, shared
 * by every instance that points at the same Redis. It only counts; windows, limits and the
 * fail-open decision belong to the core's RateLimiter.
 *
 * It never lets a caller wait on a dead Redis (C-54): it connects in the background and keeps
 * reconnecting, rejects at once while not connected (no offline queue), and rejects any call
 * still unanswered after `timeoutMs` (a frozen or partitioned Redis). It logs nothing: every
 * failure is a rejection, and the core's RateLimiter is the one owner of the counter's health
 * lines (the fail-open warning at most once per 10 s, the "available again" line).
 */
export class RedisRateCounter implements RateCounter, CredentialFreshness {
  readonly #client: Connection;
  /**
   * Credential changes only: their WAIT blocks the connection it is sent on until the replicas
   * acknowledged (or its timeout), so it must not be the hot path's.
   */
  readonly #changes: Connection;
  readonly #changeBoundMs: number;
  readonly #minReplicasAcked: number | undefined;
  readonly #replicaAckTimeoutMs: number;
  /** Tokens are `<this process's random nonce>.<sequence>`: never reused, by any process. */
  readonly #tokenNonce = randomBytes(12).toString('base64url');
  #tokenSeq = 0;
  readonly #timeoutMs: number;
  readonly #keyPrefix: string;
  readonly #target: string;
  #closed = false;
  /** Why the connection last failed (no credentials), until it is ready again: part of the not-connected rejection. */
  #connectionError: string | undefined;
  /** Redis's clock minus this process's (ms), measured at each connect: deadlines are sent on Redis's clock. */
  #clockOffsetMs = 0;

  constructor(config: RedisCounterConfig) {
    const timeoutMs = config.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new RangeError(`timeoutMs must be a positive number of milliseconds, got ${String(config.timeoutMs)}`);
    }
    this.#timeoutMs = timeoutMs;
    this.#keyPrefix = config.keyPrefix ?? DEFAULT_KEY_PREFIX;
    this.#changeBoundMs = config.changeBoundMs ?? DEFAULT_CHANGE_BOUND_MS;
    if (!Number.isFinite(this.#changeBoundMs) || this.#changeBoundMs <= 0) {
      throw new RangeError(`changeBoundMs must be a positive number of milliseconds, got ${String(config.changeBoundMs)}`);
    }
    const min = config.minReplicasAcked;
    if (min !== undefined && (!Number.isInteger(min) || min < 0)) {
      throw new RangeError(`minReplicasAcked must be a whole number of replicas, got ${String(min)}`);
    }
    this.#minReplicasAcked = min;
    this.#replicaAckTimeoutMs = config.replicaAckTimeoutMs ?? defaultReplicaAckTimeoutMs(timeoutMs);
    if (!Number.isInteger(this.#replicaAckTimeoutMs) || this.#replicaAckTimeoutMs <= 0) {
      throw new RangeError(`replicaAckTimeoutMs must be a positive whole number of milliseconds, got ${String(config.replicaAckTimeoutMs)}`);
    }
    const nodes = config.clusterNodes;
    if ((config.url === undefined) === (nodes === undefined || nodes.length === 0)) {
      throw new RangeError('exactly one of url and clusterNodes must be given');
    }
    if (nodes !== undefined && nodes.length > 0) {
      this.#target = `cluster ${nodes.map(describeTarget).join(',')}`;
      this.#client = clusterConnection(nodes);
      this.#changes = clusterConnection(nodes);
    } else {
      this.#target = describeTarget(config.url!);
      this.#client = plainConnection(config.url!);
      this.#changes = plainConnection(config.url!);
    }
    // Without an 'error' listener the client would throw. A connection error is only remembered:
    // the client reconnects by itself, and meanwhile every call rejects at once, naming it.
    this.#client.on('error', (err: unknown) => {
      this.#connectionError = errorMessage(err);
    });
    this.#changes.on('error', () => undefined);
    this.#client.on('ready', () => this.#onReady(this.#client));
    this.#changes.on('ready', () => this.#onReady(this.#changes));
    this.#client.connect().catch(() => undefined);
    this.#changes.connect().catch(() => undefined);
  }

  /** True while the connection to Redis is up; hit() rejects at once otherwise. */
  get isReady(): boolean {
    return !this.#closed && this.#client.isReady;
  }

  /** Resolves true once both connections (counting, changes) are up, or false after `timeoutMs` (never rejects). */
  whenReady(timeoutMs: number): Promise<boolean> {
    const up = (): boolean => this.isReady && this.#changes.isReady;
    if (up()) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        this.#client.off('ready', onReady);
        this.#changes.off('ready', onReady);
        resolve(ok);
      };
      const onReady = (): void => {
        if (up()) done(true);
      };
      const timer = setTimeout(() => done(up()), timeoutMs);
      this.#client.on('ready', onReady);
      this.#changes.on('ready', onReady);
    });
  }

  /** The Redis key of a key name the core gave: the name behind this counter's prefix. */
  keyFor(name: string): string {
    return `${this.#keyPrefix}:${name}`;
  }

  hit(key: string, ttlMs: number): Promise<number> {
    if (this.#closed) {
      return Promise.reject(new RedisCounterError('closed', 'redis rate counter is closed'));
    }
    if (!this.#client.isReady) {
      return Promise.reject(this.#notConnected());
    }
    const ttl = Math.max(1, Math.ceil(ttlMs));
    // One timer per call bounds it, written or not (the client's own per-command timeout is off:
    // see makeClient; unwritten commands are bounded by the queue limit).
    const deadlineMs = Date.now() + this.#clockOffsetMs + this.#timeoutMs;
    const reply = this.#client.hit(this.keyFor(key), ttl, deadlineMs);
    return new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new RedisCounterError('timeout', `redis rate counter: no answer from ${this.#target} within ${this.#timeoutMs} ms`));
      }, this.#timeoutMs);
      reply.then(
        (count) => {
          clearTimeout(timer);
          if (count === EXPIRED) reject(new RedisCounterError('expired', `redis rate counter: the hit reached ${this.#target} after its deadline; not counted`));
          else resolve(count);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(new RedisCounterError('command-failed', `redis rate counter: ${errorMessage(err)}`, { cause: err }));
        },
      );
    });
  }

  /**
   * One round trip (CredentialFreshness.check): the organisation's token and whether it is
   * settled, and its counter counted as asked. Not bounded here (the core races it against
   * REDIS_TIMEOUT_MS); a call that reaches Redis after that deadline counts nothing and rejects.
   */
  check(request: FreshnessCheck): Promise<FreshnessReply> {
    const ready = this.#readyError();
    if (ready !== null) return Promise.reject(ready);
    const deadlineMs = Date.now() + this.#clockOffsetMs + this.#timeoutMs;
    const names = request.keys;
    const keys = [this.keyFor(request.counterKey), this.keyFor(names.token), this.keyFor(names.changes), this.keyFor(names.alive), this.keyFor(names.unsettled)];
    const args = [
      String(Math.max(1, Math.ceil(request.ttlMs))),
      String(deadlineMs),
      request.tag ?? '',
      MODE[request.count],
      this.#newToken(),
      String(this.#changeBoundMs),
    ];
    return this.#client.freshness(keys, args).then(
      (reply) => {
        if (typeof reply === 'number' || !Array.isArray(reply)) {
          throw new RedisCounterError('expired', `redis credential freshness: the call reached ${this.#target} after its deadline; not counted`);
        }
        const [count, token, settled, fresh] = reply;
        return { count: count === NOT_COUNTED ? null : Number(count), token: String(token), settled: Number(settled) === 1, fresh: Number(fresh) === 1 };
      },
      (err: unknown) => {
        throw err instanceof RedisCounterError ? err : new RedisCounterError('command-failed', `redis credential freshness: ${errorMessage(err)}`, { cause: err });
      },
    );
  }

  /** Registers a change of the organisation in progress (a marker for changeBoundMs) and replaces its token. */
  async beginChange(keys: FreshnessKeys, changeId: string): Promise<void> {
    await this.#change('beginChange', keys, changeId);
  }

  /** Replaces the organisation's token again and removes the change's marker. */
  async endChange(keys: FreshnessKeys, changeId: string): Promise<void> {
    await this.#change('endChange', keys, changeId);
  }

  async #change(script: 'beginChange' | 'endChange', names: FreshnessKeys, changeId: string): Promise<void> {
    const ready = this.#readyError() ?? (this.#changes.isReady ? null : this.#notConnected());
    if (ready !== null) throw ready;
    const [token, changes, alive, unsettled] = [this.keyFor(names.token), this.keyFor(names.changes), this.keyFor(names.alive), this.keyFor(names.unsettled)];
    const connection = this.#changes;
    let wanted: number;
    try {
      // KEYS[3] is unused (the same layout as CHECK_SCRIPT's keys, so ALIVE_CHECK reads KEYS[4], KEYS[5], ARGV[6]).
      const written = connection[script]([token, changes, token, alive, unsettled], [changeId, this.#newToken(), '', '', '', String(this.#changeBoundMs)]);
      // Only the begin waits: it is what keeps every cache off the organisation's entries (a new token
      // and the marker). An end lost in a failover leaves the begin's token and marker on the promoted
      // replica: entries filled under the end's token are never fresh there, and none fills until the
      // marker expired, after the commit.
      const replicas = script === 'beginChange' && this.#minReplicasAcked === undefined ? replicaCount(connection, token) : null;
      const [reported] = await Promise.all([replicas, written]);
      if (script === 'endChange') return;
      wanted = this.#minReplicasAcked ?? Math.min(DEFAULT_MAX_REPLICAS_WAITED, reported ?? 0);
      if (wanted === 0) return;
      // WAIT on the connection that wrote: it answers how many replicas acknowledged every write it sent.
      const acked = Number(await connection.command(token, ['WAIT', String(wanted), String(this.#replicaAckTimeoutMs)]));
      if (acked >= wanted) return;
      throw new RedisCounterError(
        'not-replicated',
        `redis credential freshness: ${acked} of ${wanted} replica(s) of ${this.#target} acknowledged the change within ${this.#replicaAckTimeoutMs} ms (a failover could lose it)`,
      );
    } catch (err) {
      throw err instanceof RedisCounterError ? err : new RedisCounterError('command-failed', `redis credential freshness: ${errorMessage(err)}`, { cause: err });
    }
  }

  #newToken(): string {
    return `${this.#tokenNonce}.${++this.#tokenSeq}`;
  }

  #notConnected(): RedisCounterError {
    const cause = this.#connectionError;
    return new RedisCounterError('not-connected', `redis rate counter: not connected to ${this.#target}${cause === undefined ? '' : ` (${cause})`}`);
  }

  #readyError(): RedisCounterError | null {
    if (this.#closed) return new RedisCounterError('closed', 'redis rate counter is closed');
    if (!this.#client.isReady) return this.#notConnected();
    return null;
  }

  /** Stops reconnecting and closes the connections (waits at most 1 s for in-flight replies). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([closeConnection(this.#client), closeConnection(this.#changes)]);
  }

  #onReady(connection: Connection): void {
    if (this.#closed) {
      // a connect that was already under way when close() ran: do not keep its socket
      connection.destroy();
      return;
    }
    if (connection !== this.#client) return;
    this.#connectionError = undefined;
    void this.#measureClockOffset();
  }

  /**
   * Redis TIME against this process's clock (hosts' clocks may differ), as the lower bound of what
   * one sample can prove: Redis read its clock somewhere between sending and receiving, so its
   * offset is at least `redis - after`. A deadline computed with that bound is never later on Redis's
   * clock than the caller's own, so a hit that waited past its timeout is never counted.
   * The midpoint of one sample would be off by half its round trip, letting hits that had already
   * failed open count that much later. Of a few samples the one with the
   * shortest round trip is kept, so an in-time hit is refused (answered as failed open, uncounted)
   * only within that round trip of its deadline.
   */
  async #measureClockOffset(): Promise<void> {
    let best: { rtt: number; offset: number } | undefined;
    for (let i = 0; i < CLOCK_SAMPLES; i++) {
      try {
        const before = Date.now(); // the clock hit() computes its deadlines with
        const reply = (await this.#client.command(undefined, ['TIME'])) as [string, string];
        const after = Date.now();
        const redisMs = Number(reply[0]) * 1000 + Math.floor(Number(reply[1]) / 1000);
        if (!Number.isFinite(redisMs)) continue;
        const rtt = after - before;
        if (best === undefined || rtt < best.rtt) best = { rtt, offset: redisMs - after };
      } catch {
        break; // keep the last offset; the next connect measures again
      }
    }
    if (best !== undefined) this.#clockOffsetMs = best.offset;
  }
}

/** The replicas a primary's ROLE reply lists (0 for anything else). */
function replicasOf(role: unknown): number {
  return Array.isArray(role) && role[0] === 'master' && Array.isArray(role[2]) ? role[2].length : 0;
}

/**
 * The replicas the primary of `key` reports: ROLE, or where a provider renamed or disabled it,
 * `connected_slaves` of INFO replication. Neither answering rejects (the change is refused): set
 * REDIS_MIN_REPLICAS_ACKED then.
 */
async function replicaCount(connection: Connection, key: string): Promise<number> {
  try {
    return replicasOf(await connection.command(key, ['ROLE']));
  } catch (roleError) {
    let info: unknown;
    try {
      info = await connection.command(key, ['INFO', 'replication']);
    } catch {
      throw new RedisCounterError(
        'command-failed',
        `redis credential freshness: neither ROLE nor INFO replication answered (${errorMessage(roleError)}): set REDIS_MIN_REPLICAS_ACKED to the replicas to wait for`,
        { cause: roleError },
      );
    }
    const match = /^connected_slaves:(\d+)/m.exec(String(info));
    return match === null ? 0 : Number(match[1]);
  }
}

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

/** Plain factory: connects in the background and never throws on a dead Redis. */
export function createRedisCounter(config: RedisCounterConfig): RedisRateCounter {
  return new RedisRateCounter(config);
}
