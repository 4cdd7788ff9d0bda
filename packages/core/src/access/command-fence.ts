/**
 * An operator command's side of the credential fence (instance-lease.ts explains the protocol):
 * before each credential change the command records the change as in flight, reads the live
 * registrations, plans (fence-plan.ts) and fences the change in their Redis, or refuses it before
 * its unit of work opens, so nothing is written.
 */
import { randomUUID } from 'node:crypto';
import type { CredentialFreshness, FreshnessCheck, FreshnessKeys, FreshnessReply } from '../ports/credential-freshness.js';
import type { InstanceRegistry } from '../ports/instance-registry.js';
import { identityRefusal, NOTHING_CHANGED, planCommandFence, type FenceSource } from './fence-plan.js';
import { REGISTRATION_LIVE_MS } from './instance-lease.js';
import { sameRedis, type RedisLocation } from './redis-location.js';

/** A credential change an operator command must not make; its message is the command's one line. */
export class CommandFenceRefusal extends Error {
  override readonly name = 'CommandFenceRefusal';
}

/** The Redis a command connected to for its fence. */
export interface CommandRedis {
  readonly freshness: CredentialFreshness;
  readonly location: RedisLocation;
  readonly from: FenceSource;
  /** The identity of the Redis reached, never created (limiter-redis `identity({ create: false })`); null when it holds none. */
  readonly identity: () => Promise<string | null>;
}

/**
 * An operator command's credential freshness: before each credential change (before its unit of
 * work opens) it reads the live registrations again and fences the change in their Redis, or
 * refuses (the unit of work then never opens: nothing is written). With no live
 * registration it fences in REDIS_URL's Redis when one is set, as every writer did before there
 * was a registry; a failure there refuses the change unless CREDENTIAL_CACHE=off ('best-effort').
 */
export class CommandFence implements CredentialFreshness {
  /** organisation/change ids begun: whether in Redis, and the in-flight row to remove at the end. */
  readonly #begun = new Map<string, { readonly writeId: string; readonly redis: boolean }>();

  /**
   * `redisUrl`: the command's REDIS_URL (or cluster reference), null when unset; `redis`: the Redis
   * it connected to for the plan made at its start (null: none planned); `unregistered`: whether a
   * failure of REDIS_URL's Redis refuses the change while no instance is registered ('strict') or
   * not ('best-effort', CREDENTIAL_CACHE=off).
   */
  constructor(
    private readonly registry: Pick<InstanceRegistry, 'live' | 'beginWrite' | 'endWrite'>,
    private readonly redisUrl: string | null,
    private readonly redis: CommandRedis | null,
    private readonly unregistered: 'strict' | 'best-effort',
  ) {}

  async beginChange(keys: FreshnessKeys, changeId: string): Promise<void> {
    const id = `${keys.token}\n${changeId}`;
    // The change is recorded as in flight before the registrations are read (see instance-lease.ts).
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
      if (live.length === 0 && this.unregistered === 'best-effort') return false;
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
