/**
 * The policy of an operator command's credential fence, as pure functions of what it read: which
 * Redis a credential change is fenced in given the live registrations and the command's REDIS_URL
 * (planCommandFence), and whether the Redis it reached is the one those instances recorded
 * (identityRefusal). command-fence.ts runs them before every change; instance-lease.ts says why
 * no change can slip past a cache.
 */
import type { InstanceRecord } from '../ports/instance-registry.js';
import { redisLocationOf, redisVariable, sameRedis, type RedisLocation } from './redis-location.js';

/** Where the Redis a command fences in was named: its own REDIS_URL, or the registrations. */
export type FenceSource = 'REDIS_URL' | 'registry';

/** What a command does about a credential change, given the live registrations and its REDIS_URL. */
export type FencePlan =
  | { readonly kind: 'none' }
  | { readonly kind: 'redis'; readonly url: string; readonly location: RedisLocation; readonly from: FenceSource }
  | { readonly kind: 'refuse'; readonly message: string };

/** The end of every refusal's message: a refused change writes nothing. */
export const NOTHING_CHANGED = 'nothing was changed';

/**
 * No live registration: fence in REDIS_URL's Redis when set (as always), else nothing to fence.
 * Live registrations: fence in their Redis. REDIS_URL, when set, must name it (one of the recorded
 * locations, when instances reach one Redis by different addresses); without REDIS_URL it is
 * reached from its recorded location when all instances recorded the same one and it needs no
 * credentials, else the command refuses, naming REDIS_URL and the host:port to set.
 */
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

/**
 * Whether the Redis a command reached is the one the live instances recorded (by its identity, not
 * its address): null when it is proven so, or when nothing can be proven and REDIS_URL names it (no
 * instance recorded an identity: a version before identities; the operator's REDIS_URL is trusted
 * as before); otherwise the refusal's message. `reached` is the identity read from the Redis the
 * command connected to (null: it holds none).
 */
export function identityRefusal(
  live: readonly InstanceRecord[],
  reached: string | null,
  redis: { readonly location: RedisLocation; readonly from: FenceSource },
): string | null {
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
