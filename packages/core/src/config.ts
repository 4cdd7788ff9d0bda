/** The knobs the core needs (the cli maps environment variables onto these). */
export interface CoreConfig {
  /** Authenticated per-organisation limit per UTC minute (RATE_LIMIT_PER_MINUTE, C-53). */
  readonly rateLimitPerMinute: number;
  /** Global limit of /health + /version per UTC minute (UNAUTH_RATE_LIMIT_PER_MINUTE). */
  readonly unauthRateLimitPerMinute: number;
  /** Bound on one counter call before failing open, ms (REDIS_TIMEOUT_MS, C-54). */
  readonly rateCounterTimeoutMs: number;
  /** C-25: at most this many active keys per organisation (MAX_ACTIVE_KEYS_PER_ORG). */
  readonly maxActiveKeysPerOrg: number;
  /** C-4: the store must answer the health probe within this many ms. */
  readonly healthTimeoutMs: number;
  /** Signed secret-scanning alerts per UTC minute, one global counter (SECRET_SCANNING_RATE_LIMIT_PER_MINUTE). */
  readonly secretScanningRateLimitPerMinute: number;
  /** POST /v1/introspect calls per calling organisation and UTC minute (INTROSPECTION_RATE_LIMIT_PER_MINUTE). */
  readonly introspectionRateLimitPerMinute: number;
  /** last_used_at: a use is written within this (less a margin), ms: the precision of the field (KeyUsage). */
  readonly keyUsageFlushIntervalMs: number;
  /** Webhook endpoints may be plain http:// (WEBHOOK_ALLOW_HTTP; default only https://). */
  readonly webhookAllowHttp: boolean;
  /** Webhook endpoints may be loopback, private or internal (WEBHOOK_ALLOW_PRIVATE; development and tests). */
  readonly webhookAllowPrivate: boolean;
}

export const DEFAULT_CORE_CONFIG: CoreConfig = Object.freeze({
  rateLimitPerMinute: 60,
  unauthRateLimitPerMinute: 60,
  rateCounterTimeoutMs: 50,
  maxActiveKeysPerOrg: 1000,
  healthTimeoutMs: 1000,
  secretScanningRateLimitPerMinute: 600,
  introspectionRateLimitPerMinute: 100_000,
  keyUsageFlushIntervalMs: 60_000,
  webhookAllowHttp: false,
  webhookAllowPrivate: false,
});
