import { randomUUID } from 'node:crypto';
import type { CredentialFreshness, FreshnessCheck, FreshnessKeys, FreshnessReply, GuardedCount, KeyCounter, RateCounter } from '@cos/core';
import { resolveSettings, type RedisCounterConfig } from './config.js';
import { RedisLink } from './redis-link.js';
import { RedisCounterError, errorMessage } from './errors.js';
import { RedisFreshness } from './freshness.js';
import { EXPIRED } from './scripts.js';

/** The key name, behind the prefix, of the key holding a Redis's identity (one key: one slot of a cluster). */
export const IDENTITY_KEY_NAME = 'redis-identity';
/** identity() waits at most this long (or REDIS_TIMEOUT_MS when longer); it is never on a request's path. */
const IDENTITY_TIMEOUT_FLOOR_MS = 1_000;

/** A hit's count, or null when it was late (EXPIRED). */
const hitAnswer = (count: number): number | null => (count === EXPIRED ? null : count);
/** A guarded hit's counts, or null when it was late (a number: EXPIRED). */
const guardedAnswer = (counts: readonly number[] | number): GuardedCount | null => (typeof counts === 'number' ? null : { count: counts[0]!, keyCounts: counts.slice(1) });

/**
 * The core's RateCounter port on Redis (C-55): one counter per scope and UTC-minute window, shared
 * by every instance that points at the same Redis. It only counts; windows, limits and the
 * fail-open decision belong to the core's RateLimiter. It is also the CredentialFreshness port
 * (freshness.ts), on the same connections.
 *
 * It never lets a caller wait on a dead Redis (C-54): it connects in the background and keeps
 * reconnecting, rejects at once while not connected (no offline queue), and rejects any call
 * still unanswered after `timeoutMs` (a frozen or partitioned Redis). It logs nothing: every
 * failure is a rejection, and the core's RateLimiter is the one owner of the counter's health
 * lines (the fail-open warning at most once per 10 s, the "available again" line).
 */
export class RedisRateCounter implements RateCounter, CredentialFreshness {
  readonly #link: RedisLink;
  readonly #freshness: RedisFreshness;
  readonly #timeoutMs: number;

  constructor(config: RedisCounterConfig) {
    const settings = resolveSettings(config);
    this.#timeoutMs = settings.timeoutMs;
    this.#link = new RedisLink(config, settings.keyPrefix);
    this.#freshness = new RedisFreshness(this.#link, settings);
  }

  /** True while the connection to Redis is up; hit() rejects at once otherwise. */
  get isReady(): boolean {
    return this.#link.isReady;
  }

  /** Resolves true once both connections (counting, changes) are up, or false after `timeoutMs` (never rejects). */
  whenReady(timeoutMs: number): Promise<boolean> {
    return this.#link.whenReady(timeoutMs);
  }

  /** The Redis key of a key name the core gave: the name behind this counter's prefix. */
  keyFor(name: string): string {
    return this.#link.keyFor(name);
  }

  hit(key: string, ttlMs: number, n = 1): Promise<number> {
    const link = this.#ready();
    if (link instanceof Error) return Promise.reject(link);
    const ttl = Math.max(1, Math.ceil(ttlMs));
    // One timer per call bounds it, written or not (the client's own per-command timeout is off:
    // see makeClient; unwritten commands are bounded by the queue limit).
    const deadlineMs = Date.now() + link.clockOffsetMs + this.#timeoutMs;
    return this.#bounded(link.client.hit(link.keyFor(key), ttl, deadlineMs, Math.max(1, Math.floor(n))), hitAnswer);
  }

  /**
   * RateCounter.hitGuarded (C-292): the key counters and the organisation's in one script (they
   * share its hash tag: one slot), bounded and refused when late as hit() is.
   */
  hitGuarded(key: string, ttlMs: number, n: number, keys: readonly KeyCounter[]): Promise<GuardedCount> {
    const link = this.#ready();
    if (link instanceof Error) return Promise.reject(link);
    const deadlineMs = Date.now() + link.clockOffsetMs + this.#timeoutMs;
    const names = [link.keyFor(key)];
    const args = [String(Math.max(1, Math.ceil(ttlMs))), String(deadlineMs), String(Math.max(1, Math.floor(n)))];
    for (const k of keys) {
      names.push(link.keyFor(k.counterKey));
      args.push(String(k.hits), String(k.limit));
    }
    return this.#bounded(link.client.guardedHit(names, args), guardedAnswer);
  }

  /** The link when it can take a hit now, else the error to reject with. */
  #ready(): RedisLink | RedisCounterError {
    const link = this.#link;
    if (link.closed) return new RedisCounterError('closed', 'redis rate counter is closed');
    if (!link.client.isReady) return link.notConnected();
    return link;
  }

  /** A hit's reply bounded by the timeout; `answer` maps it, null for a hit that reached Redis after its deadline (not counted). */
  #bounded<R, T>(reply: Promise<R>, answer: (reply: R) => T | null): Promise<T> {
    const link = this.#link;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new RedisCounterError('timeout', `redis rate counter: no answer from ${link.target} within ${this.#timeoutMs} ms`));
      }, this.#timeoutMs);
      reply.then(
        (value) => {
          clearTimeout(timer);
          const mapped = answer(value);
          if (mapped === null) reject(new RedisCounterError('expired', `redis rate counter: the hit reached ${link.target} after its deadline; not counted`));
          else resolve(mapped);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(new RedisCounterError('command-failed', `redis rate counter: ${errorMessage(err)}`, { cause: err }));
        },
      );
    });
  }

  /** CredentialFreshness.check: see RedisFreshness. */
  check(request: FreshnessCheck): Promise<FreshnessReply> {
    return this.#freshness.check(request);
  }

  /** Registers a change of the organisation in progress (a marker for changeBoundMs) and replaces its token. */
  beginChange(keys: FreshnessKeys, changeId: string): Promise<void> {
    return this.#freshness.beginChange(keys, changeId);
  }

  /** Replaces the organisation's token again and removes the change's marker. */
  endChange(keys: FreshnessKeys, changeId: string): Promise<void> {
    return this.#freshness.endChange(keys, changeId);
  }

  /**
   * This Redis's identity: a random id kept in Redis itself under `<prefix>:redis-identity`, with no
   * expiry (on a cluster one key, reached through the cluster client on its slot's primary). When
   * the key is absent and `create` is set, a new id is written with SET NX, so of several creators
   * the first one's stays and all of them return it; without `create` an absent key is null and
   * nothing is written. A server reached at some address answers its own id, so two processes that
   * read the same id reach the same Redis (or a replica promoted with the key), whatever address
   * each used. Sent on the changes' connection (never the hot path's); rejects when not connected,
   * or after REDIS_TIMEOUT_MS (at least 1 s) without an answer.
   */
  async identity(options: { readonly create: boolean }): Promise<string | null> {
    const link = this.#link;
    const ready = link.readyError() ?? (link.changes.isReady ? null : link.notConnected());
    if (ready !== null) throw ready;
    const key = link.keyFor(IDENTITY_KEY_NAME);
    const boundMs = Math.max(IDENTITY_TIMEOUT_FLOOR_MS, this.#timeoutMs);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new RedisCounterError('timeout', `redis identity: no answer from ${link.target} within ${boundMs} ms`)), boundMs);
    });
    const read = async (): Promise<string | null> => {
      const found = await link.changes.command(key, ['GET', key]);
      if (found !== null && found !== undefined) return String(found);
      if (!options.create) return null;
      await link.changes.command(key, ['SET', key, randomUUID(), 'NX']);
      const stored = await link.changes.command(key, ['GET', key]);
      return stored === null || stored === undefined ? null : String(stored);
    };
    try {
      return await Promise.race([read(), late]);
    } catch (err) {
      throw err instanceof RedisCounterError ? err : new RedisCounterError('command-failed', `redis identity: ${errorMessage(err)}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops reconnecting and closes the connections (waits at most 1 s for in-flight replies). */
  close(): Promise<void> {
    return this.#link.close();
  }
}

/** Plain factory: connects in the background and never throws on a dead Redis. */
export function createRedisCounter(config: RedisCounterConfig): RedisRateCounter {
  return new RedisRateCounter(config);
}
