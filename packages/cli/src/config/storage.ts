/**
 * Where the data and the counters live: the database, and the Redis (one server or a cluster) that
 * counts requests, fences credential changes and confirms cached credentials fresh.
 */
import { z } from 'zod';
import { parseDatabaseUrl } from '@cos/store-sql';
import { clusterNodes, int, orNull, url, variable } from './variable.js';

export const STORAGE_VARIABLES = {
  DATABASE_URL: variable(
    'databaseUrl',
    'sqlite:./data/cos.sqlite',
    '`sqlite:<path>` (or `sqlite::memory:`) or `postgres://user:password@host:port/database`. A relative SQLite path is relative to the working directory; only `migrate`, `bootstrap` and `serve` create a missing file (and its directory)',
    z
      .string()
      .default('sqlite:./data/cos.sqlite')
      .superRefine((s, ctx) => {
        try {
          parseDatabaseUrl(s); // its messages name DATABASE_URL and never echo a password
        } catch (e) {
          ctx.addIssue({ code: 'custom', message: (e as Error).message });
        }
      }),
  ),
  REDIS_URL: variable(
    'redisUrl',
    'unset',
    'unset: in-process limiter (one instance only); set (`redis://` or `rediss://`): counters in Redis, shared by every instance. `serve` asks it at start: a Redis Cluster node refuses the start (set `REDIS_CLUSTER_NODES`); no answer: it starts, connects in the background and `/readyz` answers 503 until Redis answers (operations guide, section 3)',
    url('REDIS_URL', ['redis:', 'rediss:'], 'a redis:// or rediss:// URL (or unset for the in-process limiter)').optional().transform(orNull),
  ),
  REDIS_CLUSTER_NODES: variable(
    'redisClusterNodes',
    'unset',
    'a Redis Cluster instead of `REDIS_URL` (both set: a start-up error naming both): seed nodes `redis://host:port,redis://host:port,…` (the first one\'s user, password and TLS apply to every node); counters and credential freshness then use the cluster client, every key of one organisation in one hash slot. `serve` asks every seed at start: one without cluster support refuses the start (set `REDIS_URL`); none answering: it starts, connects in the background and `/readyz` answers 503 until one answers (operations guide, section 3)',
    clusterNodes('REDIS_CLUSTER_NODES').optional().transform(orNull),
  ),
  REDIS_MIN_REPLICAS_ACKED: variable(
    'redisMinReplicasAcked',
    'unset',
    'replicas a credential change (revocation, expiry shortening, organisation change) must reach before it is answered 2xx (Redis `WAIT`, within 60 % of the fence bound: 150 ms by default), else 503 with nothing changed; unset: 1 where the organisation\'s primary has a replica (in a cluster: any replica the cluster lists for it, its link up or cut, even one marked failed; with `REDIS_URL`: the replicas the primary reports), else 0; `0`: never wait (a failover may then bring a revoked key back)',
    int('REDIS_MIN_REPLICAS_ACKED', 0, 16).optional().transform(orNull),
  ),
};
