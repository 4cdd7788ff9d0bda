/**
 * Configuration from the environment (contract, "Operator interface"), validated once at start.
 * A bad value stops the process with one line that names the variable and what is wrong with it.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import type { CoreConfig } from '@cos/core';
import { parseDatabaseUrl } from '@cos/store-sql';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface AppConfig {
  /** `sqlite:<path>`, `sqlite::memory:` or `postgres://…` */
  readonly databaseUrl: string;
  /** Unset (null): in-process limiter; set: Redis limiter shared by every instance (C-55). */
  readonly redisUrl: string | null;
  readonly host: string;
  readonly port: number;
  readonly rateLimitPerMinute: number;
  readonly unauthRateLimitPerMinute: number;
  readonly logLevel: LogLevel;
  /** True when LOG_LEVEL was set: operator commands then log (on stderr) at that level; otherwise not at all. */
  readonly logLevelExplicit: boolean;
  readonly maxActiveKeysPerOrg: number;
  /** Base of the 429 `type` address (C-51), without a trailing slash. */
  readonly errorsUrl: string;
  readonly redisTimeoutMs: number;
  /**
   * Trust X-Forwarded-For for the client address (the per-source 401 throttle, C-50). Set it only
   * behind a load balancer that overwrites that header; otherwise a client could pick its address.
   */
  readonly trustProxy: boolean;
  /** Postgres: parameterised statements as named prepared statements (off behind PgBouncer < 1.21 in transaction mode). */
  readonly databasePreparedStatements: boolean;
  /** Path of the secret-scanning programme's public-key file; null: the alert endpoint is off (404). */
  readonly secretScanningPublicKeys: string | null;
  readonly secretScanningRateLimitPerMinute: number;
  /** Webhook delivery (C-59): bound on one attempt, attempts before `failed`, first retry delay, poll interval. */
  readonly webhookTimeoutMs: number;
  readonly webhookMaxAttempts: number;
  readonly webhookRetryBaseMs: number;
  readonly webhookPollIntervalMs: number;
  /**
   * CREDENTIAL_CACHE (default on): with Postgres and REDIS_URL, keys and organisations are kept in
   * memory and confirmed fresh in the Redis call that counts each request (issue 14), and every
   * credential write is fenced in Redis (503 when Redis cannot be reached). Off: every request reads
   * the store. Without REDIS_URL or on SQLite it has no effect.
   */
  readonly credentialCache: boolean;
  /** The operations listener (GET /livez, /readyz, /metrics) of `serve`: null (OPS_PORT unset) means off. */
  readonly opsPort: number | null;
  readonly opsHost: string;
}

/** The configuration table of the contract: variable, default, meaning (also printed by `--help`). */
export const CONFIG_TABLE: readonly { variable: string; default: string; meaning: string }[] = [
  { variable: 'DATABASE_URL', default: 'sqlite:./data/cos.sqlite', meaning: 'sqlite:<path> (or sqlite::memory:) or postgres://…' },
  { variable: 'REDIS_URL', default: 'unset', meaning: 'unset: in-process limiter; set: Redis limiter' },
  { variable: 'HOST', default: '127.0.0.1', meaning: 'listen address' },
  { variable: 'PORT', default: '3000', meaning: 'listen port (0: any free port)' },
  { variable: 'RATE_LIMIT_PER_MINUTE', default: '60', meaning: 'authenticated per-organisation limit' },
  { variable: 'UNAUTH_RATE_LIMIT_PER_MINUTE', default: '60', meaning: 'global limit of /health + /version' },
  { variable: 'LOG_LEVEL', default: 'info', meaning: 'pino level; logs are JSON lines on stdout' },
  { variable: 'MAX_ACTIVE_KEYS_PER_ORG', default: '1000', meaning: 'active keys per organisation (C-25)' },
  { variable: 'ERRORS_URL', default: 'https://errors.example.com', meaning: 'base of the 429 type address (C-51)' },
  { variable: 'REDIS_TIMEOUT_MS', default: '50', meaning: 'bound on one counter call before failing open (C-54)' },
  { variable: 'TRUST_PROXY', default: 'false', meaning: 'true behind a load balancer: client address from X-Forwarded-For' },
  { variable: 'DATABASE_PREPARED_STATEMENTS', default: 'true', meaning: 'Postgres: prepared statements; false behind PgBouncer < 1.21 in transaction mode' },
  { variable: 'SECRET_SCANNING_PUBLIC_KEYS', default: 'unset', meaning: "path of the secret-scanning programme's public-key JSON file; unset: POST /v1/secret-scanning/alerts is off (404); re-read on SIGHUP" },
  { variable: 'SECRET_SCANNING_RATE_LIMIT_PER_MINUTE', default: '600', meaning: 'signed secret-scanning alerts per minute (their own global counter)' },
  { variable: 'WEBHOOK_TIMEOUT_MS', default: '10000', meaning: 'bound on one webhook delivery attempt' },
  { variable: 'WEBHOOK_MAX_ATTEMPTS', default: '10', meaning: 'delivery attempts before a notification is failed (about 24 h with the default backoff)' },
  { variable: 'WEBHOOK_RETRY_BASE_MS', default: '5000', meaning: 'delay after the first failed attempt; each later one is 4 times longer, at most 8 h' },
  { variable: 'WEBHOOK_POLL_INTERVAL_MS', default: '1000', meaning: 'how often serve looks for due webhook notifications' },
  {
    variable: 'CREDENTIAL_CACHE',
    default: 'on',
    meaning: 'Postgres + REDIS_URL: keys cached in memory, confirmed fresh in the Redis call that counts each request; credential writes answer 503 while Redis is unreachable; off: every request reads Postgres',
  },
  { variable: 'OPS_PORT', default: 'unset', meaning: 'unset: no operations listener; set: serve also answers GET /livez, /readyz and /metrics (Prometheus) on this port (0: any free port), without key or rate limit' },
  { variable: 'OPS_HOST', default: '127.0.0.1', meaning: 'listen address of the operations listener' },
];

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

const INT_MAX = 2_147_483_647;

/** true/false (also 1/0, yes/no, any case). */
function bool(name: string, fallback: boolean) {
  return z
    .string()
    .default(String(fallback))
    .transform((s) => s.trim().toLowerCase())
    .refine((s) => ['true', 'false', '1', '0', 'yes', 'no'].includes(s), {
      message: `${name} must be true or false`,
    })
    .transform((s) => s === 'true' || s === '1' || s === 'yes');
}

/** An integer variable in [min, max], written as plain decimal digits. */
function int(name: string, fallback: number, min: number, max: number) {
  const message = max === INT_MAX ? `${name} must be an integer of at least ${min}` : `${name} must be an integer from ${min} to ${max}`;
  return z
    .string()
    .default(String(fallback))
    .refine((s) => /^\d{1,10}$/.test(s.trim()), { message })
    .transform((s) => Number(s.trim()))
    .refine((n) => Number.isSafeInteger(n) && n >= min && n <= max, { message });
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

function host(name: string) {
  return z
    .string()
    .default('127.0.0.1')
    .refine((s) => /^[A-Za-z0-9.:\-[\]]+$/.test(s), { message: `${name} must be a host name or an IP address` });
}

/** Unset stays null (off); a value is validated by `inner` (whose default then never applies). */
function optional<T>(inner: z.ZodType<T, string | undefined>) {
  return z
    .string()
    .optional()
    .transform((s, ctx): T | null => {
      if (s === undefined) return null;
      const parsed = inner.safeParse(s);
      if (parsed.success) return parsed.data;
      for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message });
      return z.NEVER;
    });
}

const schema = z.object({
  DATABASE_URL: z
    .string()
    .default('sqlite:./data/cos.sqlite')
    .superRefine((s, ctx) => {
      try {
        parseDatabaseUrl(s); // its messages name DATABASE_URL and never echo a password
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: (e as Error).message });
      }
    }),
  REDIS_URL: url('REDIS_URL', ['redis:', 'rediss:'], 'a redis:// or rediss:// URL (or unset for the in-process limiter)')
    .optional(),
  HOST: host('HOST'),
  PORT: int('PORT', 3000, 0, 65535),
  RATE_LIMIT_PER_MINUTE: int('RATE_LIMIT_PER_MINUTE', 60, 1, INT_MAX),
  UNAUTH_RATE_LIMIT_PER_MINUTE: int('UNAUTH_RATE_LIMIT_PER_MINUTE', 60, 1, INT_MAX),
  LOG_LEVEL: z
    .string()
    .default('info')
    .transform((s) => s.trim().toLowerCase())
    .refine((s): s is LogLevel => (LOG_LEVELS as readonly string[]).includes(s), {
      message: `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`,
    }),
  MAX_ACTIVE_KEYS_PER_ORG: int('MAX_ACTIVE_KEYS_PER_ORG', 1000, 1, INT_MAX),
  ERRORS_URL: url('ERRORS_URL', ['http:', 'https:'], 'an http:// or https:// URL').default('https://errors.example.com'),
  REDIS_TIMEOUT_MS: int('REDIS_TIMEOUT_MS', 50, 1, 60_000),
  TRUST_PROXY: bool('TRUST_PROXY', false),
  DATABASE_PREPARED_STATEMENTS: bool('DATABASE_PREPARED_STATEMENTS', true),
  SECRET_SCANNING_PUBLIC_KEYS: z.string().optional(),
  SECRET_SCANNING_RATE_LIMIT_PER_MINUTE: int('SECRET_SCANNING_RATE_LIMIT_PER_MINUTE', 600, 1, INT_MAX),
  WEBHOOK_TIMEOUT_MS: int('WEBHOOK_TIMEOUT_MS', 10_000, 100, 600_000),
  WEBHOOK_MAX_ATTEMPTS: int('WEBHOOK_MAX_ATTEMPTS', 10, 1, 100),
  WEBHOOK_RETRY_BASE_MS: int('WEBHOOK_RETRY_BASE_MS', 5_000, 10, 86_400_000),
  WEBHOOK_POLL_INTERVAL_MS: int('WEBHOOK_POLL_INTERVAL_MS', 1_000, 10, 3_600_000),
  CREDENTIAL_CACHE: z
    .string()
    .default('on')
    .transform((s) => s.trim().toLowerCase())
    .refine((s) => s === 'on' || s === 'off', { message: 'CREDENTIAL_CACHE must be on or off' }),
  OPS_PORT: optional(int('OPS_PORT', 0, 0, 65535)),
  OPS_HOST: host('OPS_HOST'),
});

export interface LoadConfigOptions {
  /** A `.env` file to read when it exists (variables already set win). Default `./.env`; false: none. */
  readonly envFile?: string | false;
}

/**
 * Reads and validates the configuration. Empty values count as unset. Throws ConfigError with one
 * line naming every bad variable.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, options: LoadConfigOptions = {}): AppConfig {
  const envFile = options.envFile ?? '.env';
  if (envFile !== false && env === process.env) {
    const path = resolve(envFile);
    if (existsSync(path)) {
      try {
        process.loadEnvFile(path);
      } catch (e) {
        throw new ConfigError(`cannot read ${path}: ${(e as Error).message}`);
      }
    }
  }
  const raw: Record<string, string> = {};
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    if (value !== undefined && value.trim() !== '') raw[key] = value.trim();
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const messages = [...new Set(parsed.error.issues.map((i) => i.message))];
    throw new ConfigError(`invalid configuration: ${messages.join('; ')}`);
  }
  const v = parsed.data;
  return Object.freeze({
    databaseUrl: v.DATABASE_URL,
    redisUrl: v.REDIS_URL ?? null,
    host: v.HOST,
    port: v.PORT,
    rateLimitPerMinute: v.RATE_LIMIT_PER_MINUTE,
    unauthRateLimitPerMinute: v.UNAUTH_RATE_LIMIT_PER_MINUTE,
    logLevel: v.LOG_LEVEL as LogLevel,
    logLevelExplicit: raw['LOG_LEVEL'] !== undefined,
    maxActiveKeysPerOrg: v.MAX_ACTIVE_KEYS_PER_ORG,
    errorsUrl: v.ERRORS_URL.replace(/\/+$/, ''),
    redisTimeoutMs: v.REDIS_TIMEOUT_MS,
    trustProxy: v.TRUST_PROXY,
    databasePreparedStatements: v.DATABASE_PREPARED_STATEMENTS,
    secretScanningPublicKeys: v.SECRET_SCANNING_PUBLIC_KEYS ?? null,
    secretScanningRateLimitPerMinute: v.SECRET_SCANNING_RATE_LIMIT_PER_MINUTE,
    webhookTimeoutMs: v.WEBHOOK_TIMEOUT_MS,
    webhookMaxAttempts: v.WEBHOOK_MAX_ATTEMPTS,
    webhookRetryBaseMs: v.WEBHOOK_RETRY_BASE_MS,
    webhookPollIntervalMs: v.WEBHOOK_POLL_INTERVAL_MS,
    credentialCache: v.CREDENTIAL_CACHE === 'on',
    opsPort: v.OPS_PORT,
    opsHost: v.OPS_HOST,
  });
}

/** The knobs the core takes from the configuration. */
export function coreConfigOf(config: AppConfig): Partial<CoreConfig> {
  return {
    rateLimitPerMinute: config.rateLimitPerMinute,
    unauthRateLimitPerMinute: config.unauthRateLimitPerMinute,
    rateCounterTimeoutMs: config.redisTimeoutMs,
    maxActiveKeysPerOrg: config.maxActiveKeysPerOrg,
    secretScanningRateLimitPerMinute: config.secretScanningRateLimitPerMinute,
  };
}
