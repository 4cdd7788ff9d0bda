/**
 * Credential changes reach every caching instance, whoever makes them. An instance that caches
 * credentials records itself in the shared instance registry (ports/instance-registry.ts) with the
 * Redis it fences with (InstanceRegistrar, here: the lease its credential cache consults); an
 * operator command, before each credential change, records the change as in flight and reads the
 * live registrations (CommandFence, command-fence.ts): it fences the change in that Redis, or
 * refuses it before anything is written, even when it was given no REDIS_URL.
 *
 * Why no change can slip past a cache:
 * - An instance refreshes its row every REGISTRATION_HEARTBEAT_MS. A command counts a row as live
 *   while the registry's clock (the database's) says its last heartbeat is less than REGISTRATION_LIVE_MS old.
 * - The instance holds its cache lease (core's CredentialCacheLease) only until
 *   REGISTRATION_TRUST_MS after it *sent* its last successful heartbeat (its own monotonic clock):
 *   the row was written after that, so by the time a command may call it dead (LIVE_MS after the
 *   write) the instance has stopped trusting its cache for LIVE_MS - TRUST_MS already.
 * - Registering (first, or again after a lapse) and a command's change race safely: the command
 *   writes its in-flight row and then reads the registrations (inside its unit of work, right
 *   before the write); the instance writes its registration and then reads the in-flight rows. One
 *   of them sees the other. The command that sees the instance fences in its Redis; the instance
 *   that sees a change in flight takes no lease until no change is in flight (the command removes
 *   its row after its commit; a dead command's row stops counting after LIVE_MS). Every lease
 *   starts with an empty cache, so nothing read before a change committed is kept.
 * - A clean shutdown closes the lease first, then deletes the row.
 *
 * Why a command fences in the instances' Redis and not just in one at the same address: an address
 * (`redis://127.0.0.1:6410/0`) names another Redis on another host. Each instance reads its Redis's
 * identity (a random id kept in that Redis itself, created by the first reader) at every heartbeat
 * and records it with its row; the command reads the identity of the Redis it reached and fences
 * there only when it is the one the instances recorded, else refuses before anything is written.
 */
import { randomUUID } from 'node:crypto';
import { LogThrottle } from '../log-throttle.js';
import type { InstanceRegistry } from '../ports/instance-registry.js';
import type { Logger } from '../ports/logger.js';
import type { CredentialCacheLease } from './credential-cache.js';
import type { RedisLocation } from './redis-location.js';

/** How often a caching instance refreshes its registration. */
export const REGISTRATION_HEARTBEAT_MS = 5_000;
/** A registration is live, for operator commands, while its last heartbeat is younger than this (the registry's clock). */
export const REGISTRATION_LIVE_MS = 30_000;
/** An instance trusts its cache at most this long after sending its last successful heartbeat (< LIVE_MS). */
export const REGISTRATION_TRUST_MS = 20_000;
/** A failed heartbeat is logged at most this often. */
const WARN_INTERVAL_MS = 10_000;

export interface RegistrationTimings {
  readonly heartbeatMs: number;
  readonly trustMs: number;
  readonly liveMs: number;
}

export const DEFAULT_REGISTRATION_TIMINGS: RegistrationTimings = Object.freeze({
  heartbeatMs: REGISTRATION_HEARTBEAT_MS,
  trustMs: REGISTRATION_TRUST_MS,
  liveMs: REGISTRATION_LIVE_MS,
});

/** The Redis an instance registers with: where it is, and how to read its identity (absent: none recorded). */
export interface RegisteredRedis extends RedisLocation {
  /** The Redis's identity, created there when absent (limiter-redis `identity({ create: true })`). */
  readonly identity?: () => Promise<string | null>;
}

/**
 * A caching instance's registration: heartbeats in the background from start() until stop(), and
 * the lease its credential cache consults on every request (`epoch()`).
 */
export class InstanceRegistrar implements CredentialCacheLease {
  readonly instanceId = randomUUID();
  #validUntil = Number.NEGATIVE_INFINITY;
  #epoch = 0;
  #waitLogged = false;
  #stopped = false;
  #started = false;
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<boolean> | null = null;
  readonly #warnings = new LogThrottle(WARN_INTERVAL_MS, () => this.now());
  readonly #identityWarnings = new LogThrottle(WARN_INTERVAL_MS, () => this.now());
  /** The identity last read from the Redis (null until one was). */
  #identity: string | null = null;

  constructor(
    private readonly registry: Pick<InstanceRegistry, 'heartbeat' | 'writesInFlight' | 'remove' | 'prune'>,
    private readonly redis: RegisteredRedis,
    private readonly logger: Logger,
    private readonly timings: RegistrationTimings = DEFAULT_REGISTRATION_TIMINGS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** null while the cache may not be trusted; otherwise the lease's number, new each time it is taken. */
  epoch(): number | null {
    const t = this.now();
    if (this.#stopped || t >= this.#validUntil) return null;
    return this.#epoch;
  }

  /** Registers now (resolves when the first heartbeat is answered, well or not) and keeps heartbeating. */
  async start(): Promise<void> {
    if (this.#started || this.#stopped) return;
    this.#started = true;
    await this.heartbeat();
    // Rows of instances long dead (killed without a clean shutdown) are dropped now and then.
    await this.registry.prune().catch(() => undefined);
    this.#schedule();
  }

  /** One heartbeat; true when the row was written. Exposed for tests. */
  heartbeat(): Promise<boolean> {
    this.#inFlight ??= this.#beat().finally(() => {
      this.#inFlight = null;
    });
    return this.#inFlight;
  }

  async #beat(): Promise<boolean> {
    const sent = this.now();
    let taking = false;
    try {
      const redisIdentity = await this.#readIdentity();
      await this.registry.heartbeat({ instanceId: this.instanceId, redisLocation: this.redis.location, redisAuth: this.redis.auth, redisIdentity });
      if (this.now() >= this.#validUntil) {
        // No lease held (the first registration, or one that lapsed): commands may be changing
        // credentials unfenced right now. Read after the row is written (see the module comment).
        if ((await this.registry.writesInFlight(this.timings.liveMs)) > 0) {
          if (!this.#waitLogged) this.logger.info({ component: 'instance-registry' }, 'an operator command is changing credentials: the credential cache waits for it to finish');
          this.#waitLogged = true;
          return false;
        }
        taking = true;
      }
    } catch (e) {
      if (this.#warnings.pass() !== null) {
        const t = this.now();
        const held = t < this.#validUntil;
        this.logger.warn(
          { component: 'instance-registry', reason: e instanceof Error ? e.message : String(e) },
          held
            ? 'instance registration not refreshed; the credential cache is bypassed if it stays so'
            : 'instance registration not refreshed: the credential cache is bypassed until it is',
        );
      }
      return false;
    }
    if (this.#stopped) return false;
    if (taking) {
      // A new lease: commands may have changed credentials unfenced while none was held, so the
      // cache starts empty (a new epoch).
      this.#epoch += 1;
      this.#waitLogged = false;
      if (this.#epoch > 1) this.logger.info({ component: 'instance-registry' }, 'instance registration refreshed again: the credential cache starts empty');
    }
    this.#validUntil = Math.max(this.#validUntil, sent + this.timings.trustMs);
    return true;
  }

  /**
   * The Redis's identity, read again at every heartbeat (a Redis restarted empty gets a new one,
   * which the row must follow). Unreadable: null, and the row keeps what it recorded; while none
   * was ever read, commands without REDIS_URL refuse, which is logged.
   */
  async #readIdentity(): Promise<string | null> {
    if (this.redis.identity === undefined) return null;
    try {
      const identity = await this.redis.identity();
      if (identity !== null) this.#identity = identity;
      return identity;
    } catch (e) {
      if (this.#identity === null && this.#identityWarnings.pass() !== null) {
        this.logger.warn(
          { component: 'instance-registry', reason: e instanceof Error ? e.message : String(e) },
          "the Redis's identity could not be read: operator commands without REDIS_URL refuse credential changes until it is",
        );
      }
      return null;
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    // Without a lease (waiting for a command's change, or the database unreachable) sooner.
    const delay = this.now() < this.#validUntil ? this.timings.heartbeatMs : Math.min(this.timings.heartbeatMs, 1_000);
    this.#timer = setTimeout(() => {
      void this.heartbeat().finally(() => this.#schedule());
    }, delay);
    this.#timer.unref();
  }

  /** Closes the lease (the cache is bypassed from now on), then removes the row. Idempotent; never throws. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#inFlight?.catch(() => undefined);
    if (!this.#started) return;
    await this.registry.remove(this.instanceId).catch((e: unknown) => {
      this.logger.warn({ component: 'instance-registry', reason: e instanceof Error ? e.message : String(e) }, 'instance registration not removed; it expires by itself');
    });
  }
}
