/**
 * Configuration from the environment (contract, "Operator interface"), validated once at start.
 * A bad value stops the process with one line that names the variable and what is wrong with it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { z } from 'zod';
import { parseWebhookSecretKey, WebhookSecretCipher, type CoreConfig } from '@cos/core';
import { parseDatabaseUrl } from '@cos/store-sql';
import { parseEnvFile } from './env-file.js';
import { clusterRef } from './redis-target.js';
import { DURATION_GRAMMAR, parseDuration } from './values.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

const INT_MAX = 2_147_483_647;

/** true/false (also 1/0, yes/no, any case): zod's string-to-boolean coercion with this word list. */
function bool(name: string) {
  return z.stringbool({ truthy: ['true', '1', 'yes'], falsy: ['false', '0', 'no'], error: `${name} must be true or false` });
}

/**
 * An integer variable in [min, max], written as plain decimal digits: the pattern keeps out what
 * zod's number coercion (`Number()`) would also take, such as `1e3`, `0x10`, `1.0` or `+5`.
 */
function int(name: string, min: number, max: number) {
  const error = max === INT_MAX ? `${name} must be an integer of at least ${min}` : `${name} must be an integer from ${min} to ${max}`;
  return z
    .string()
    .regex(/^\d{1,10}$/, { error })
    .pipe(z.coerce.number<string>().min(min, { error }).max(max, { error }));
}

function url(name: string, protocols: readonly string[], what: string) {
  return z.string().refine(
    (s) => {
      try {
        const u = new URL(s);
        return protocols.includes(u.protocol) && (u.protocol === 'sqlite:' || u.host !== '');
      } catch {
        return false;
      }
    },
    { message: `${name} must be ${what}` },
  );
}

/** A comma-separated list of redis:// or rediss:// URLs naming a host and a port. */
function clusterNodes(name: string) {
  return z
    .string()
    .refine(
      (s) =>
        s.split(',').every((part) => {
          try {
            const u = new URL(part.trim());
            return ['redis:', 'rediss:'].includes(u.protocol) && u.hostname !== '' && u.port !== '';
          } catch {
            return false;
          }
        }),
      { message: `${name} must be a comma-separated list of redis://host:port (or rediss://) URLs` },
    )
    .transform((s): readonly string[] => s.split(',').map((part) => part.trim()));
}

function host(name: string) {
  return z
    .string()
    .default('127.0.0.1')
    .refine((s) => /^[A-Za-z0-9.:\-[\]]+$/.test(s), { message: `${name} must be a host name or an IP address` });
}

/**
 * A secret key (32 bytes, hex or base64), or a comma-separated list of them: the message names the
 * variable and never repeats the value.
 */
function secretKeys(name: string, list: boolean) {
  return z
    .string()
    .optional()
    .transform((s, ctx) => {
      if (s === undefined) return [];
      const parts = list ? s.split(',').map((p) => p.trim()).filter((p) => p !== '') : [s];
      const keys: Uint8Array[] = [];
      for (const [i, part] of parts.entries()) {
        try {
          keys.push(parseWebhookSecretKey(part));
        } catch (e) {
          ctx.addIssue({ code: 'custom', message: `${name}${list ? ` (key ${i + 1})` : ''} ${(e as Error).message}` });
          return z.NEVER;
        }
      }
      return keys;
    });
}

/** Most worker processes `serve` runs (WORKERS, --workers). */
export const MAX_WORKERS = 64;

/** A number of workers, `1` to MAX_WORKERS, or `auto`: the cores available to this process. */
export function parseWorkers(text: string): number | null {
  const s = text.trim().toLowerCase();
  if (s === 'auto') return Math.min(MAX_WORKERS, Math.max(1, availableParallelism()));
  if (!/^\d{1,3}$/.test(s)) return null;
  const n = Number(s);
  return n >= 1 && n <= MAX_WORKERS ? n : null;
}

export function workersMessage(name: string): string {
  return `${name} must be a whole number from 1 to ${MAX_WORKERS}, or auto`;
}

function workers(name: string) {
  return z
    .string()
    .refine((s) => parseWorkers(s) !== null, { error: workersMessage(name) })
    .transform((s) => parseWorkers(s) as number);
}

/** The CLI's duration grammar (values.ts, as every duration option), more than zero -> milliseconds. */
function duration(name: string, d: string) {
  const error = `${name} must be more than zero and ${DURATION_GRAMMAR}`;
  const parse = (s: string): number | null => {
    try {
      return parseDuration(s);
    } catch {
      return null;
    }
  };
  return z
    .string()
    .default(d)
    .refine((s) => parse(s) !== null, { error })
    .transform((s) => parse(s) as number);
}

/**
 * One configuration variable: the AppConfig field it gives, its default as documented (`unset` when
 * it has none), what it means (Markdown: `code` in backticks), and its parser (default applied,
 * message naming the variable), whose output is the field's value and type.
 */
interface Variable<F extends string, S extends z.ZodType> {
  readonly field: F;
  readonly default: string;
  readonly meaning: string;
  readonly schema: S;
}

const variable = <const F extends string, S extends z.ZodType>(field: F, d: string, meaning: string, schema: S): Variable<F, S> => ({ field, default: d, meaning, schema });

/** An unset optional variable is null in AppConfig. */
const orNull = <T>(value: T | undefined): T | null => value ?? null;

/**
 * THE configuration definition: every variable once, in the order the docs list them.
 * The tables in README.md, docs/operations.md and packages/cli/README.md, `.env.example` and
 * `cos-admin --help` are generated from it (`pnpm docs:config`; a test fails when one is stale), and
 * AppConfig's type is inferred from it. Adding a variable: an entry here, then `pnpm docs:config`.
 */
const VARIABLES = {
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
  HOST: variable(
    'host',
    '127.0.0.1',
    'listen address; `0.0.0.0` to accept connections from other machines',
    host('HOST'),
  ),
  PORT: variable('port', '3000', 'listen port; `0` takes any free port (the start-up line says which)', int('PORT', 0, 65535).default(3000)),
  MAX_CONNECTIONS: variable(
    'maxConnections',
    'unset',
    "connections the API listener holds at once; unset: the process's soft descriptor limit (`ulimit -n`) less a reserve of a quarter of it, 32 to 256 (768 at 1024). At the cap a new connection closes the least recently active idle one, or one still sending a request body (unauthenticated ones first); a connection whose request has fully arrived is never closed for it (operations guide, section 10)",
    int('MAX_CONNECTIONS', 1, 1_000_000).optional().transform(orNull),
  ),
  HEADERS_TIMEOUT_MS: variable(
    'headersTimeoutMs',
    '10000',
    "a request's header section must arrive within this (a silent or slow connection is answered 408 and closed); at most `REQUEST_TIMEOUT_MS`",
    int('HEADERS_TIMEOUT_MS', 100, 600_000).default(10_000),
  ),
  REQUEST_TIMEOUT_MS: variable(
    'requestTimeoutMs',
    '30000',
    'a whole request, body included, must arrive within this (a trickled body is answered 408 and closed); the handling time after it is not counted',
    int('REQUEST_TIMEOUT_MS', 100, 3_600_000).default(30_000),
  ),
  KEY_USAGE_FLUSH_MS: variable(
    'keyUsageFlushMs',
    '60000',
    "how far `last_used_at` may lag: each use is written within this (less a margin of a twelfth, at most 5 s), so the stored value is never further behind a key's last use, a crash included; at most one write per key per this interval per instance",
    int('KEY_USAGE_FLUSH_MS', 1_000, 3_600_000).default(60_000),
  ),
  RATE_LIMIT_PER_MINUTE: variable('rateLimitPerMinute', '60', 'authenticated requests per organisation per UTC minute', int('RATE_LIMIT_PER_MINUTE', 1, INT_MAX).default(60)),
  UNAUTH_RATE_LIMIT_PER_MINUTE: variable(
    'unauthRateLimitPerMinute',
    '60',
    '`/v1/health` + `/v1/version` per UTC minute, one counter for all callers',
    int('UNAUTH_RATE_LIMIT_PER_MINUTE', 1, INT_MAX).default(60),
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
    '`true` behind a load balancer that overwrites `X-Forwarded-For`: failed authentications are throttled per client address instead of per balancer',
    bool('TRUST_PROXY').default(false),
  ),
  DATABASE_PREPARED_STATEMENTS: variable(
    'databasePreparedStatements',
    'true',
    'Postgres: every parameterised statement is a named prepared statement; `false` behind a pooler that cannot keep them per client (PgBouncer in transaction mode before 1.21)',
    bool('DATABASE_PREPARED_STATEMENTS').default(true),
  ),
  SECRET_SCANNING_PUBLIC_KEYS: variable(
    'secretScanningPublicKeys',
    'unset',
    "path of the secret-scanning programme's public-key JSON file; unset: `POST /v1/secret-scanning/alerts` is off (404). Read at start (a file that does not parse stops `serve`) and on `SIGHUP`",
    z.string().optional().transform(orNull),
  ),
  SECRET_SCANNING_KEYS_URL: variable(
    'secretScanningKeysUrl',
    'unset',
    "URL of the secret-scanning programme's published public-key list (the same JSON as the file); set: `POST /v1/secret-scanning/alerts` is on and `serve` fetches the list at start, every `SECRET_SCANNING_KEYS_REFRESH` and at once (at most once a minute) on an alert naming an unknown key identifier; a failed fetch keeps the last good list and is logged once. Works together with `SECRET_SCANNING_PUBLIC_KEYS` (keys from both are accepted)",
    url('SECRET_SCANNING_KEYS_URL', ['http:', 'https:'], 'an http:// or https:// URL').optional().transform(orNull),
  ),
  SECRET_SCANNING_KEYS_REFRESH: variable(
    'secretScanningKeysRefreshMs',
    '1h',
    'how often `serve` fetches `SECRET_SCANNING_KEYS_URL` again (`1h`, `30m`, `1d`)',
    duration('SECRET_SCANNING_KEYS_REFRESH', '1h'),
  ),
  SECRET_SCANNING_RATE_LIMIT_PER_MINUTE: variable(
    'secretScanningRateLimitPerMinute',
    '600',
    'signed secret-scanning alerts per UTC minute, one counter of their own',
    int('SECRET_SCANNING_RATE_LIMIT_PER_MINUTE', 1, INT_MAX).default(600),
  ),
  WEBHOOK_TIMEOUT_MS: variable(
    'webhookTimeoutMs',
    '10000',
    'bound on one webhook delivery attempt (connect, send, answer), at most 30000: a claim outlives its attempt (lease: twice this plus 1 s), so an attempt lost with its instance is made again within about a minute; at shutdown attempts in flight are abandoned and due again at once',
    int('WEBHOOK_TIMEOUT_MS', 100, 30_000).default(10_000),
  ),
  WEBHOOK_CONCURRENCY: variable(
    'webhookConcurrency',
    '32',
    'most webhook delivery attempts one `serve` makes at once, each to a different endpoint (one attempt at a time per endpoint, in write order); only this many endpoints that never answer can delay the others',
    int('WEBHOOK_CONCURRENCY', 1, 1_000).default(32),
  ),
  WEBHOOK_MAX_ATTEMPTS: variable(
    'webhookMaxAttempts',
    '10',
    'delivery attempts before a notification is `failed` (with the default backoff the last is about 24 h after the first)',
    int('WEBHOOK_MAX_ATTEMPTS', 1, 100).default(10),
  ),
  WEBHOOK_RETRY_BASE_MS: variable(
    'webhookRetryBaseMs',
    '5000',
    'delay after the first failed attempt; each later delay is 4 times longer (at most 8 h), with ±20 % jitter',
    int('WEBHOOK_RETRY_BASE_MS', 10, 86_400_000).default(5_000),
  ),
  WEBHOOK_POLL_INTERVAL_MS: variable(
    'webhookPollIntervalMs',
    '1000',
    'how often each `serve` looks for due webhook notifications',
    int('WEBHOOK_POLL_INTERVAL_MS', 10, 3_600_000).default(1_000),
  ),
  WEBHOOK_ALLOW_HTTP: variable(
    'webhookAllowHttp',
    'false',
    '`true`: webhook endpoints may be plain `http://` URLs (otherwise `https://` only); checked by `org webhook set` and again at every delivery',
    bool('WEBHOOK_ALLOW_HTTP').default(false),
  ),
  WEBHOOK_ALLOW_PRIVATE: variable(
    'webhookAllowPrivate',
    'false',
    '`true` (development and tests only): webhook endpoints may be loopback, private (RFC 1918, 100.64/10), link-local or unique-local addresses and internal names (`localhost`, `*.internal`…); unspecified, multicast, broadcast and reserved addresses stay refused. Otherwise such endpoints are refused by `org webhook set`, and at every delivery on the address actually connected to (operations guide, webhooks)',
    bool('WEBHOOK_ALLOW_PRIVATE').default(false),
  ),
  WEBHOOK_SECRET_ENCRYPTION_KEY: variable(
    'webhookSecretKeys',
    'unset',
    'unset: webhook signing secrets are stored in clear; set: 32 random bytes as 64 hex digits or base64 (`openssl rand -base64 32`), and new or rotated secrets are stored encrypted under it (AES-256-GCM); `cos-admin org webhook reencrypt-secrets` encrypts those already stored. Every `serve` and operator command needs the same value (operations guide, section 8)',
    secretKeys('WEBHOOK_SECRET_ENCRYPTION_KEY', false),
  ),
  WEBHOOK_SECRET_PREVIOUS_KEYS: variable(
    'webhookPreviousKeys',
    'unset',
    'comma-separated earlier values of `WEBHOOK_SECRET_ENCRYPTION_KEY`, used only to decrypt secrets still stored under them while the key is rotated (until `reencrypt-secrets` has moved them)',
    secretKeys('WEBHOOK_SECRET_PREVIOUS_KEYS', true),
  ),
  NOTIFICATION_RETENTION: variable(
    'notificationRetentionMs',
    '30d',
    'how long delivered and failed webhook notifications are kept after they completed (`30d`, `12h`, `90m`); each `serve` purges older ones at start and then hourly (or once per retention period if that is shorter); pending ones are never purged',
    duration('NOTIFICATION_RETENTION', '30d'),
  ),
  USAGE_RETENTION: variable(
    'usageRetentionMs',
    '90d',
    "how long the keys' usage counts per hour are kept (`90d`, `12w`, `36h`); each `serve` deletes older hours at start and then hourly (or once per retention period if that is shorter); the usage routes answer nothing older",
    duration('USAGE_RETENTION', '90d'),
  ),
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

type Variables = typeof VARIABLES;
type Shape = { [K in keyof Variables]: Variables[K]['schema'] };
/** Each variable's value under its AppConfig field. */
type Fields = { [K in keyof Variables as Variables[K]['field']]: z.output<Variables[K]['schema']> };

/**
 * The environment (variable name -> trimmed non-empty value) to AppConfig: each variable to its
 * field, then the fields made of several variables (the Redis target, the webhook secret cipher).
 */
const schema = z.object(Object.fromEntries(Object.entries(VARIABLES).map(([name, v]) => [name, v.schema])) as Shape).transform((values) => {
  const fields = Object.fromEntries(Object.entries(VARIABLES).map(([name, v]) => [v.field, values[name as keyof Variables]])) as Fields;
  const { logLevel, redisUrl, webhookSecretKeys, webhookPreviousKeys, ...rest } = fields;
  return {
    ...rest,
    ...logLevel,
    redisUrl: redisUrl ?? (rest.redisClusterNodes === null ? null : clusterRef(rest.redisClusterNodes)),
    webhookSecrets: new WebhookSecretCipher({ current: webhookSecretKeys[0] ?? null, previous: webhookPreviousKeys }),
  };
});

/**
 * The configuration `serve` and the operator commands run with, one field per variable (see
 * VARIABLES and the configuration table for each), besides: `redisUrl` is REDIS_URL, or
 * `cluster:<REDIS_CLUSTER_NODES>` for a Redis Cluster (redis-target.ts reads both forms), or null
 * (neither set: in-process limiter); `logLevelExplicit` is whether LOG_LEVEL was set (operator
 * commands then log on stderr at that level, otherwise not at all); `webhookSecrets` seals webhook
 * signing secrets under WEBHOOK_SECRET_ENCRYPTION_KEY and opens those sealed under it or a
 * WEBHOOK_SECRET_PREVIOUS_KEYS key, holding the keys in private fields (neither printed nor serialised).
 */
// The schema's output, named through loadConfig: its return type is inferred, so its declaration
// spells the fields out rather than naming the (unexported) schema.
export type AppConfig = ReturnType<typeof loadConfig>;

/** The configuration table: variable, default, meaning (Markdown), in definition order. */
export const CONFIG_TABLE: readonly { variable: string; default: string; meaning: string }[] = Object.freeze(
  Object.entries(VARIABLES).map(([name, v]) => Object.freeze({ variable: name, default: v.default, meaning: v.meaning })),
);

export interface LoadConfigOptions {
  /**
   * A `.env` file to read when it exists (variables already set win; the file's are added to `env`).
   * Default: `./.env` when `env` is process.env, else none; false: none.
   */
  readonly envFile?: string | false;
}

/**
 * Reads and validates the configuration. Empty values count as unset. Throws ConfigError with one
 * line naming every bad variable.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, options: LoadConfigOptions = {}) {
  const envFile = options.envFile ?? (env === process.env ? '.env' : false);
  /** Variable -> where its value came from, for those taken from the .env file. */
  const fromFile = new Map<string, string>();
  if (envFile !== false) {
    const path = resolve(envFile);
    if (existsSync(path)) {
      let text: string;
      try {
        text = readFileSync(path, 'utf8');
      } catch (e) {
        throw new ConfigError(`cannot read ${path}: ${(e as Error).message}`);
      }
      const { values, problems } = parseEnvFile(text);
      if (problems.length > 0) {
        throw new ConfigError(`${path}: ${problems.map((p) => `line ${p.line}: ${p.problem}`).join('; ')}`);
      }
      for (const [name, { value, line }] of values) {
        // Variables already set in the environment win over the file (as with process.loadEnvFile).
        if (env[name] !== undefined) continue;
        env[name] = value;
        fromFile.set(name, `${path} line ${line}`);
      }
    }
  }
  const raw: Record<string, string> = {};
  for (const key of Object.keys(VARIABLES)) {
    const value = env[key];
    if (value !== undefined && value.trim() !== '') raw[key] = value.trim();
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const messages = [
      ...new Set(
        parsed.error.issues.map((i) => {
          const source = fromFile.get(String(i.path[0]));
          return source === undefined ? i.message : `${i.message} (from ${source})`;
        }),
      ),
    ];
    throw new ConfigError(`invalid configuration: ${messages.join('; ')}`);
  }
  const config = parsed.data;
  if (raw['REDIS_URL'] !== undefined && raw['REDIS_CLUSTER_NODES'] !== undefined) {
    throw new ConfigError('invalid configuration: REDIS_URL and REDIS_CLUSTER_NODES are both set: set REDIS_URL for one Redis or REDIS_CLUSTER_NODES for a Redis Cluster, not both');
  }
  // Node's http.Server refuses a header timeout longer than the request timeout.
  if (config.headersTimeoutMs > config.requestTimeoutMs) {
    throw new ConfigError('invalid configuration: HEADERS_TIMEOUT_MS must not be greater than REQUEST_TIMEOUT_MS');
  }
  return Object.freeze(config);
}

/** The knobs the core takes from the configuration. */
export function coreConfigOf(config: AppConfig): Partial<CoreConfig> {
  return {
    rateLimitPerMinute: config.rateLimitPerMinute,
    unauthRateLimitPerMinute: config.unauthRateLimitPerMinute,
    rateCounterTimeoutMs: config.redisTimeoutMs,
    maxActiveKeysPerOrg: config.maxActiveKeysPerOrg,
    secretScanningRateLimitPerMinute: config.secretScanningRateLimitPerMinute,
    webhookAllowHttp: config.webhookAllowHttp,
    webhookAllowPrivate: config.webhookAllowPrivate,
    keyUsageFlushIntervalMs: config.keyUsageFlushMs,
  };
}
