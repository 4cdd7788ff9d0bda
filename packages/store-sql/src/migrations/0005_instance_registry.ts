/**
 * The instance registry (instance-registry.ts): each `serve` instance that caches credentials
 * records itself (role 'cache') and the Redis it fences credential changes with (a URL without
 * credentials, and whether that Redis needs them), so an operator command learns that caches are
 * in use without being told; an operator command records each credential change it has in flight
 * (role 'writer', no Redis) while it checks for caches. Times are the database's clock (epoch ms),
 * written and compared by SQL only.
 */
import { idType, type SqlMigration } from './migration.js';

export const instanceRegistry: SqlMigration = {
  name: '0005_instance_registry',
  statements(dialect) {
    const ID = idType(dialect);
    return [
      `CREATE TABLE instance_registry (
        instance_id ${ID} PRIMARY KEY,
        role text NOT NULL CHECK (role IN ('cache', 'writer')),
        redis_location text NULL,
        redis_auth boolean NOT NULL,
        started_at bigint NOT NULL,
        heartbeat_at bigint NOT NULL
      )`,
    ];
  },
};
