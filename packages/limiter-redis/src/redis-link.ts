/**
 * The link that owns the adapter's two connections (the hot path's and the credential changes'):
 * which Redis they reach, their readiness and close, the not-connected errors, and Redis's clock
 * offset measured on each connect.
 */
import { clusterConnection } from './cluster-connection.js';
import { CONNECT_TIMEOUT_MS, MAX_PENDING_COMMANDS, plainConnection, reconnectDelayMs, type Connection } from './connection.js';
import { RedisCounterError, errorMessage } from './errors.js';
import { RespConnection } from './resp.js';

/** TIME round trips measured on each connect; the shortest one gives the clock offset. */
const CLOCK_SAMPLES = 5;
/** close() waits this long for in-flight replies before dropping the socket. */
const CLOSE_GRACE_MS = 1_000;

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
