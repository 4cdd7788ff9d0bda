/**
 * `serve`'s start-up check of its Redis target (REDIS_URL or REDIS_CLUSTER_NODES), before anything
 * connects: every node it names is asked what it is (limiter-redis's probeRedisTarget).
 * - A Redis Cluster node named by REDIS_URL, or a Redis without cluster support named by
 *   REDIS_CLUSTER_NODES: the start is refused (exit 1) with one line naming the variable and the fix.
 *   Either would serve and fail open for good (MOVED for the organisations of the other nodes; every
 *   discovery refused).
 * - No node answering: the start goes on (the counter connects in the background, as documented),
 *   one warning says so, and readiness answers "not ready" until a node has answered; the nodes are
 *   asked again every REDIS_REPROBE_MS until then. A target found wrong at that later answer keeps
 *   the instance not ready, with one error line saying why.
 */
import type { Logger } from '@cos/core';
import type { RedisTargetProbe } from '@cos/limiter-redis';
import type { AppConfig } from './config.js';
import { CliError } from './errors.js';
import { counterTarget, redisVariable } from './redis-target.js';

/** How long each node may take to answer at start before the start goes on without it. */
const REDIS_START_PROBE_MS = 2_000;
/** While no node has answered: how often they are asked again. */
const REDIS_REPROBE_MS = 1_000;

/** What readiness asks: null once a node answered and the target is right, else why not. */
export interface RedisStartCheck {
  notReady(): string | null;
  /** Stops asking again (shutdown). */
  stop(): void;
}

const READY: RedisStartCheck = { notReady: () => null, stop: () => undefined };

/** The one line of a wrong target, naming the variable and the fix (host:port only, never credentials). */
function wrongRedisTargetMessage(probe: RedisTargetProbe): string | null {
  if (probe.kind === 'cluster-node') {
    return `REDIS_URL points at a Redis Cluster node (${probe.node}): set REDIS_CLUSTER_NODES to the cluster's nodes instead`;
  }
  if (probe.kind === 'not-cluster') {
    return `REDIS_CLUSTER_NODES names ${probe.node}, which is not a Redis Cluster node (cluster support disabled): set REDIS_URL to it instead`;
  }
  return null;
}

/** Checks the target; throws the CliError of a wrong one; else what readiness asks from now on. */
export async function checkRedisAtStart(config: AppConfig, logger: Logger): Promise<RedisStartCheck> {
  const ref = config.redisUrl;
  if (ref === null) return READY;
  const { probeRedisTarget } = await import('@cos/limiter-redis');
  const target = counterTarget(ref);
  const first = await probeRedisTarget(target, REDIS_START_PROBE_MS);
  const wrong = wrongRedisTargetMessage(first);
  if (wrong !== null) throw new CliError(wrong, { code: 'CONFIG_ERROR' });
  if (first.kind !== 'unreachable') return READY;

  const variable = redisVariable(ref);
  logger.warn(
    { variable, reason: first.reason },
    `${variable}: no Redis node answered yet; connecting in the background, and not ready (/readyz 503) until one answers`,
  );
  let notReady: string | null = 'redis not reached yet';
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const again = (): void => {
    timer = setTimeout(() => {
      void probeRedisTarget(target, REDIS_START_PROBE_MS).then((probe) => {
        if (stopped) return;
        if (probe.kind === 'unreachable') return again();
        const message = wrongRedisTargetMessage(probe);
        notReady = message;
        if (message === null) logger.info({ variable }, `${variable}: Redis answered; ready`);
        else logger.error({ variable }, message);
      });
    }, REDIS_REPROBE_MS);
    timer.unref();
  };
  again();
  return {
    notReady: () => notReady,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
