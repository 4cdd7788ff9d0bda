/**
 * Credential changes reach every caching instance, whoever makes them. A `serve` instance that
 * caches credentials (Postgres, REDIS_URL, CREDENTIAL_CACHE on) records itself in the database's
 * instance registry with the Redis it fences with (InstanceRegistrar); an operator command, before
 * each credential change, records the change as in flight and reads the live registrations
 * (CommandFence): it fences the change in that Redis, or refuses it before anything is written,
 * even when it was given no REDIS_URL.
 *
 * Why no change can slip past a cache:
 * - An instance refreshes its row every REGISTRATION_HEARTBEAT_MS. A command counts a row as live
 *   while the database's clock says its last heartbeat is less than REGISTRATION_LIVE_MS old.
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
import { LogThrottle, type CredentialCacheLease, type CredentialFreshness, type FreshnessCheck, type FreshnessKeys, type FreshnessReply, type Logger } from '@cos/core';
import type { InstanceRecord, InstanceRegistry } from '@cos/store-sql';
import { clusterNodesOf, clusterRef, redisVariable } from './redis-target.js';

/** How often a caching instance refreshes its registration. */
export const REGISTRATION_HEARTBEAT_MS = 5_000;
/** A registration is live, for operator commands, while its last heartbeat is younger than this (database clock). */
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

const DEFAULT_REGISTRATION_TIMINGS: RegistrationTimings = Object.freeze({
  heartbeatMs: REGISTRATION_HEARTBEAT_MS,
  trustMs: REGISTRATION_TRUST_MS,
  liveMs: REGISTRATION_LIVE_MS,
});

/** Where a Redis is, without credentials: what the registry records and what is compared. */
export interface RedisLocation {
  /** `redis[s]://host:port/db` (lower-case host, default port 6379, default db 0). */
  readonly location: string;
  /** `host:port`, for messages. */
  readonly target: string;
  /** The URL carries a user name or a password. */
  readonly auth: boolean;
}

/**
 * The credential-free location of a Redis reference (a REDIS_URL, a cluster's `cluster:<seed
 * nodes>`: redis-target.ts) or of a recorded location. A cluster's is `cluster:` and its seed nodes'
 * locations, sorted; it is itself a reference a command can connect with.
 */
export function redisLocationOf(url: string): RedisLocation {
  const nodes = clusterNodesOf(url);
  if (nodes !== null) {
    const each = [...new Map(nodes.map((n) => redisLocationOf(n)).map((l) => [l.location, l])).values()].sort((a, b) => a.location.localeCompare(b.location));
    return { location: clusterRef(each.map((l) => l.location)), target: `cluster ${each.map((l) => l.target).join(',')}`, auth: each.some((l) => l.auth) };
  }
  const u = new URL(url);
  const scheme = u.protocol.replace(/:$/, '');
  const host = u.hostname.toLowerCase();
  const port = u.port === '' ? '6379' : u.port;
  const db = u.pathname.replace(/^\/+/, '').replace(/\/+$/, '') || '0';
  return { location: `${scheme}://${host}:${port}/${db}`, target: `${host}:${port}`, auth: u.username !== '' || u.password !== '' };
}

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

/** What a command does about a credential change, given the live registrations and its REDIS_URL. */
export type FencePlan =
  | { readonly kind: 'none' }
  | { readonly kind: 'redis'; readonly url: string; readonly location: RedisLocation; readonly from: 'REDIS_URL' | 'registry' }
  | { readonly kind: 'refuse'; readonly message: string };

const NOTHING_CHANGED = 'nothing was changed';

/**
 * Whether two locations name the same Redis: equal, or two clusters that share a seed node (seed
 * lists of one cluster may differ between instances and commands).
 */
function sameRedis(a: string, b: string): boolean {
  if (a === b) return true;
  const [na, nb] = [clusterNodesOf(a), clusterNodesOf(b)];
  return na !== null && nb !== null && na.some((n) => nb.includes(n));
}

export function planCommandFence(live: readonly InstanceRecord[], redisUrl: string | null): FencePlan {
  const configured = redisUrl === null ? null : redisLocationOf(redisUrl);
  if (live.length === 0) return configured === null || redisUrl === null ? { kind: 'none' } : { kind: 'redis', url: redisUrl, location: configured, from: 'REDIS_URL' };
  const locations = [...new Set(live.map((r) => r.redisLocation))];
  const recorded = locations.map((l) => redisLocationOf(l));
  const targets = recorded.map((l) => l.target).join(', ');
  if (configured !== null && redisUrl !== null) {
    const matching = locations.find((l) => sameRedis(l, configured.location));
    // The recorded location is the one compared later (CommandFence checks the plan again before each change).
    if (matching !== undefined) return { kind: 'redis', url: redisUrl, location: { ...configured, location: matching }, from: 'REDIS_URL' };
    const name = redisVariable(redisUrl);
    return {
      kind: 'refuse',
      message: `${name} names the Redis at ${configured.target} (${configured.location}), but the running instances cache credentials with the Redis at ${targets} (${locations.join(', ')}): set ${redisVariable(locations[0]!)} to that Redis; ${NOTHING_CHANGED}`,
    };
  }
  // Instances given different seed lists of one cluster recorded one Redis.
  if (locations.some((l) => !sameRedis(l, locations[0]!))) {
    return {
      kind: 'refuse',
      message: `the running instances cache credentials with Redis at different addresses (${targets}): set ${redisVariable(locations[0]!)} to their Redis and run the command again; ${NOTHING_CHANGED}`,
    };
  }
  const only = recorded[0]!;
  if (live.some((r) => r.redisAuth)) {
    return {
      kind: 'refuse',
      message: `the running instances cache credentials with the Redis at ${only.target}, which needs credentials: set ${redisVariable(only.location)} to that Redis (${only.location} with its password) and run the command again; ${NOTHING_CHANGED}`,
    };
  }
  return { kind: 'redis', url: only.location, location: only, from: 'registry' };
}

/** A credential change an operator command must not make; its message is the command's one line. */
export class CommandFenceRefusal extends Error {
  override readonly name = 'CommandFenceRefusal';
}

/** The Redis a command connected to for its fence. */
export interface CommandRedis {
  readonly freshness: CredentialFreshness;
  readonly location: RedisLocation;
  readonly from: 'REDIS_URL' | 'registry';
  /** The identity of the Redis reached, never created (limiter-redis `identity({ create: false })`); null when it holds none. */
  readonly identity: () => Promise<string | null>;
}

/**
 * Whether the Redis a command reached is the one the live instances recorded (by its identity, not
 * its address): null when it is proven so, or when nothing can be proven and REDIS_URL names it (no
 * instance recorded an identity: a version before identities; the operator's REDIS_URL is trusted
 * as before); otherwise the refusal's message. `reached` is the identity read from the Redis the
 * command connected to (null: it holds none).
 */
export function identityRefusal(live: readonly InstanceRecord[], reached: string | null, redis: Pick<CommandRedis, 'location' | 'from'>): string | null {
  const recorded = [...new Set(live.flatMap((r) => (r.redisIdentity === null ? [] : [r.redisIdentity])))];
  const target = redis.location.target;
  const variable = redisVariable(redis.location.location);
  if (recorded.length > 1) {
    return `the running instances cache credentials with ${recorded.length} different Redis servers (the identities they recorded differ) at ${target}: the fence works only when all instances share one Redis; ${NOTHING_CHANGED}`;
  }
  if (recorded.length === 0) {
    if (redis.from === 'REDIS_URL') return null;
    return `the running instances recorded no identity of their Redis at ${target} (a version that records none, or their Redis has not answered them yet), so this command cannot prove that the Redis it reached there is theirs: set ${variable} to their Redis and run the command again; ${NOTHING_CHANGED}`;
  }
  if (reached === recorded[0]) return null;
  const why = reached === null ? 'it holds no identity, theirs holds one' : 'its identity differs from the one they recorded';
  return `the Redis this command reached at ${target} is not the one the running instances cache credentials with (${why}): from this host that address names another Redis; run the command where the instances' Redis answers at that address, or set ${variable} to it; ${NOTHING_CHANGED}`;
}

/**
 * An operator command's credential freshness: before each credential change (before its unit of
 * work opens) it reads the live registrations again and fences the change in their Redis, or
 * refuses (the unit of work then never opens: nothing is written). With no live
 * registration it fences in REDIS_URL's Redis when one is set, as every writer did before there
 * was a registry; a failure there refuses the change unless CREDENTIAL_CACHE=off (`bestEffort`).
 */
export class CommandFence implements CredentialFreshness {
  /** organisation/change ids begun: whether in Redis, and the in-flight row to remove at the end. */
  readonly #begun = new Map<string, { readonly writeId: string; readonly redis: boolean }>();

  constructor(
    private readonly registry: Pick<InstanceRegistry, 'live' | 'beginWrite' | 'endWrite'>,
    private readonly redisUrl: string | null,
    private readonly redis: CommandRedis | null,
    private readonly bestEffort: boolean,
  ) {}

  async beginChange(keys: FreshnessKeys, changeId: string): Promise<void> {
    const id = `${keys.token}\n${changeId}`;
    // The change is recorded as in flight before the registrations are read (see the module comment).
    const writeId = randomUUID();
    await this.registry.beginWrite(writeId);
    try {
      const redis = await this.#fence(keys, changeId);
      this.#begun.set(id, { writeId, redis });
    } catch (e) {
      await this.registry.endWrite(writeId).catch(() => undefined);
      throw e;
    }
  }

  /** Fences the change as the live registrations require; true when it was begun in Redis. */
  async #fence(keys: FreshnessKeys, changeId: string): Promise<boolean> {
    const live = await this.registry.live(REGISTRATION_LIVE_MS);
    const plan = planCommandFence(live, this.redisUrl);
    if (plan.kind === 'refuse') throw new CommandFenceRefusal(plan.message);
    if (plan.kind === 'none') return false;
    const redis = this.redis;
    // The Redis connected at the start must still be the one the plan names (an instance may have registered since).
    if (redis === null || !sameRedis(redis.location.location, plan.location.location)) {
      throw new CommandFenceRefusal(
        `instances caching credentials with the Redis at ${plan.location.target} registered while the command ran: run it again${this.redisUrl === null ? '' : ' (REDIS_URL must name that Redis)'}; ${NOTHING_CHANGED}`,
      );
    }
    try {
      // Live instances: the Redis reached must be theirs, proven by its identity, before the fence
      // (and so before the unit of work writes anything).
      if (live.length > 0) {
        const refusal = identityRefusal(live, await redis.identity(), redis);
        if (refusal !== null) throw new CommandFenceRefusal(refusal);
      }
      await redis.freshness.beginChange(keys, changeId);
      return true;
    } catch (e) {
      if (e instanceof CommandFenceRefusal) throw e;
      if (live.length === 0 && this.bestEffort) return false;
      if (redis.from === 'registry') {
        throw new CommandFenceRefusal(
          `the Redis at ${redis.location.target}, with which the running instances cache credentials, is unreachable (REDIS_URL is not set; the instances recorded it): credential changes are refused; ${NOTHING_CHANGED}`,
          { cause: e },
        );
      }
      throw e;
    }
  }

  /** After the commit (or rollback): ends the change in Redis, then removes its in-flight row. */
  async endChange(keys: FreshnessKeys, changeId: string): Promise<void> {
    const id = `${keys.token}\n${changeId}`;
    const begun = this.#begun.get(id);
    if (begun === undefined) return;
    if (begun.redis) await this.redis!.freshness.endChange(keys, changeId);
    this.#begun.delete(id);
    // A row left behind (the database unreachable) stops counting after REGISTRATION_LIVE_MS.
    await this.registry.endWrite(begun.writeId).catch(() => undefined);
  }

  /** Commands never authenticate requests: only for the port's sake. */
  check(request: FreshnessCheck): Promise<FreshnessReply> {
    if (this.redis === null) return Promise.reject(new Error('operator commands keep no credential cache'));
    return this.redis.freshness.check(request);
  }
}
