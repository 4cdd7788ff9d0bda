/**
 * How `serve` runs: its worker processes and their memory, the operations listener, and whether
 * credentials are cached in memory.
 */
import { z } from 'zod';
import { host, int, orNull, variable, workers } from './variable.js';

export const PROCESSES_VARIABLES = {
  WORKERS: variable(
    'workers',
    '1',
    "`serve`'s worker processes behind one port (`node:cluster`; a primary process forks, supervises and relays signals), or `auto`: the cores available (`os.availableParallelism()`); `--workers` overrides it. More than 1 needs `REDIS_URL` or `REDIS_CLUSTER_NODES` (each worker would otherwise count rate limits on its own) (operations guide, section 12)",
    workers('WORKERS').default(1),
  ),
  MEMORY_LIMIT_MB: variable(
    'memoryLimitMb',
    'unset',
    "memory all of `serve`'s processes may use together, in MiB; each worker runs with a V8 heap limit derived from it (the primary's reserve taken off, the rest shared among the workers, less each worker's memory outside the heap). Unset: the container's cgroup memory limit when there is one, else 192 per worker plus 96 (operations guide, section 12)",
    int('MEMORY_LIMIT_MB', 128, 16_777_216).optional().transform(orNull),
  ),
  OPS_PORT: variable(
    'opsPort',
    'unset',
    'unset: no operations listener; set: `serve` also answers `GET /livez`, `/readyz` and `/metrics` (Prometheus) on this port (`0`: any free port), without key or rate limit, never on the API port',
    int('OPS_PORT', 0, 65535).optional().transform(orNull),
  ),
  OPS_HOST: variable('opsHost', '127.0.0.1', 'listen address of the operations listener', host('OPS_HOST')),
  CREDENTIAL_CACHE: variable(
    'credentialCache',
    'on',
    'Postgres with `REDIS_URL` only: keys and organisations kept in memory and confirmed fresh in the Redis call that counts each request (one round trip, no Postgres read); revocations and organisation changes answer 503 while Redis cannot be reached; each caching instance records itself and its Redis (no credentials) in the database, so operator commands fence their changes there even without `REDIS_URL`, or refuse; `off`: every request reads Postgres (operations guide, section 3)',
    z.stringbool({ truthy: ['on'], falsy: ['off'], error: 'CREDENTIAL_CACHE must be on or off' }).default(true),
  ),
};
