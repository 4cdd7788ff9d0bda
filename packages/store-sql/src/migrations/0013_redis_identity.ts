/**
 * A Redis's identity in the instance registry: the random id a caching instance read from its Redis
 * (a key kept in that Redis itself, limiter-redis `identity()`), so that an operator command proves
 * the Redis it reached is the instances' before it fences a change there, whatever address it
 * reached it by. NULL for rows written by instances that record none (a version before this one).
 */
import type { SqlMigration } from './migration.js';

export const redisIdentity: SqlMigration = {
  name: '0013_redis_identity',
  statements() {
    return ['ALTER TABLE instance_registry ADD COLUMN redis_identity text NULL'];
  },
};
