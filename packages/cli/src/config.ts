/**
 * Configuration from the environment (contract, "Operator interface"), validated once at start.
 * A bad value stops the process with one line that names the variable and what is wrong with it.
 * The variables are defined by section in config/ (storage, listener, service, secret scanning,
 * webhooks, processes); VARIABLES below puts the sections together in the order the docs list them.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { WebhookSecretCipher, type CoreConfig } from '@cos/core';
import { parseEnvFile } from './env-file.js';
import { clusterRef } from './redis-target.js';
import { LISTENER_VARIABLES } from './config/listener.js';
import { PROCESSES_VARIABLES } from './config/processes.js';
import { SECRET_SCANNING_VARIABLES } from './config/secret-scanning.js';
import { SERVICE_VARIABLES } from './config/service.js';
import { STORAGE_VARIABLES } from './config/storage.js';
import { WEBHOOKS_VARIABLES } from './config/webhooks.js';

export { LOG_LEVELS, type LogLevel } from './config/service.js';
export { parseWorkers, workersMessage } from './config/variable.js';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * THE configuration definition: every variable once, in the order the docs list them (section by
 * section, each section's variables in the order of its file).
 * The tables in README.md, docs/operations.md and packages/cli/README.md, `.env.example` and
 * `cos-admin --help` are generated from it (`pnpm docs:config`; a test fails when one is stale), and
 * AppConfig's type is inferred from it. Adding a variable: an entry in the section of config/ it
 * belongs to (a new section: a file there and its place in this list), then `pnpm docs:config`.
 */
const VARIABLES = {
  ...STORAGE_VARIABLES,
  ...LISTENER_VARIABLES,
  ...SERVICE_VARIABLES,
  ...SECRET_SCANNING_VARIABLES,
  ...WEBHOOKS_VARIABLES,
  ...PROCESSES_VARIABLES,
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
  if (config.trustedProxies !== null && !config.trustProxy) {
    throw new ConfigError('invalid configuration: TRUSTED_PROXIES is set but TRUST_PROXY is not true: set TRUST_PROXY=true to believe X-Forwarded-For from those proxies, or unset TRUSTED_PROXIES');
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
    introspectionRateLimitPerMinute: config.introspectionRateLimitPerMinute,
    webhookAllowHttp: config.webhookAllowHttp,
    webhookAllowPrivate: config.webhookAllowPrivate,
    keyUsageFlushIntervalMs: config.keyUsageFlushMs,
  };
}
