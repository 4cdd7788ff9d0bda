/**
 * The service's own behaviour: rate limits (introspection's ceiling included) and the active-key
 * cap, how far last use and usage counts may lag and how long the counts are kept, the bound on a
 * Redis counter call, client addresses behind a proxy, Postgres statement preparation, the log level
 * and the base of a 429's `type`.
 */
import { z } from 'zod';
import { bool, cidrList, duration, int, INT_MAX, orNull, url, variable } from './variable.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const SERVICE_VARIABLES = {
  KEY_USAGE_FLUSH_MS: variable(
    'keyUsageFlushMs',
    '60000',
    "how far `last_used_at` may lag: each use is written within this (less a margin of a twelfth, at most 5 s), so the stored value is never further behind a key's last use, a crash included; at most one write per key per this interval per instance",
    int('KEY_USAGE_FLUSH_MS', 1_000, 3_600_000).default(60_000),
  ),
  USAGE_RETENTION: variable(
    'usageRetentionMs',
    '90d',
    "how long the keys' usage counts per hour are kept (`90d`, `12w`, `36h`); each `serve` deletes older hours at start and then hourly (or once per retention period if that is shorter); the usage routes answer nothing older",
    duration('USAGE_RETENTION', '90d'),
  ),
  RATE_LIMIT_PER_MINUTE: variable('rateLimitPerMinute', '60', 'authenticated requests per organisation per UTC minute, for organisations without a limit of their own (`cos-admin org limit set`)', int('RATE_LIMIT_PER_MINUTE', 1, INT_MAX).default(60)),
  UNAUTH_RATE_LIMIT_PER_MINUTE: variable(
    'unauthRateLimitPerMinute',
    '60',
    '`/v1/health` + `/v1/version` per UTC minute, one counter for all callers',
    int('UNAUTH_RATE_LIMIT_PER_MINUTE', 1, INT_MAX).default(60),
  ),
  INTROSPECTION_RATE_LIMIT_PER_MINUTE: variable(
    'introspectionRateLimitPerMinute',
    '100000',
    '`POST /v1/introspect` calls per calling organisation and UTC minute, a counter of their own: introspection never counts against the calling organisation\'s own limit',
    int('INTROSPECTION_RATE_LIMIT_PER_MINUTE', 1, INT_MAX).default(100_000),
  ),
  LOG_LEVEL: variable(
    'logLevel',
    'info',
    '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`; the server logs JSON lines on stdout',
    // Also whether it was set: operator commands log only then.
    z
      .string()
      .optional()
      .transform((s) => ({ logLevel: (s ?? 'info').trim().toLowerCase(), logLevelExplicit: s !== undefined }))
      .pipe(z.object({ logLevel: z.enum(LOG_LEVELS, { error: `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}` }), logLevelExplicit: z.boolean() })),
  ),
  MAX_ACTIVE_KEYS_PER_ORG: variable(
    'maxActiveKeysPerOrg',
    '1000',
    'active (unrevoked, unexpired) keys an organisation may hold; issuing one more is refused with 409 CONFLICT',
    int('MAX_ACTIVE_KEYS_PER_ORG', 1, INT_MAX).default(1000),
  ),
  ERRORS_URL: variable(
    'errorsUrl',
    'https://errors.example.com',
    'base of the `type` address of a 429 answer (`{ERRORS_URL}/rate-limit-exceeded`): set your own',
    url('ERRORS_URL', ['http:', 'https:'], 'an http:// or https:// URL')
      .default('https://errors.example.com')
      .transform((s) => s.replace(/\/+$/, '')),
  ),
  REDIS_TIMEOUT_MS: variable(
    'redisTimeoutMs',
    '50',
    'bound on one Redis counter call; a slower or failed call lets the request through (fails open) and logs a warning. A credential-cache call is slower only when its answer was not already waiting when the instance next read its sockets after the bound; a late call costs its own request a Postgres read, a failed one empties the credential cache (operations guide, section 3)',
    int('REDIS_TIMEOUT_MS', 1, 60_000).default(50),
  ),
  TRUST_PROXY: variable(
    'trustProxy',
    'false',
    "`true` behind a load balancer or proxy: the client address is taken from `X-Forwarded-For` (the rightmost hop, the one the connecting proxy appended, unless `TRUSTED_PROXIES` says more) instead of the connecting address, so failed authentications are throttled per client instead of per balancer and keys restricted to networks see the client",
    bool('TRUST_PROXY').default(false),
  ),
  TRUSTED_PROXIES: variable(
    'trustedProxies',
    'unset',
    'with `TRUST_PROXY=true`: comma-separated CIDRs of your proxies and load balancers. Starting from the connecting address, each address inside them is a proxy whose `X-Forwarded-For` hop is believed, rightmost first; the first address outside them is the client. Unset: only the connecting proxy\'s own hop (the rightmost) is believed. The client address throttles failed authentications and is checked against keys restricted to networks',
    cidrList('TRUSTED_PROXIES').optional().transform(orNull),
  ),
  DATABASE_PREPARED_STATEMENTS: variable(
    'databasePreparedStatements',
    'true',
    'Postgres: every parameterised statement is a named prepared statement; `false` behind a pooler that cannot keep them per client (PgBouncer in transaction mode before 1.21)',
    bool('DATABASE_PREPARED_STATEMENTS').default(true),
  ),
};
