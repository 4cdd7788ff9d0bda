/**
 * Webhook delivery: bounds, concurrency and retries of attempts, which endpoints are allowed, the
 * keys signing secrets are sealed under at rest, and how long finished notifications are kept.
 */
import { bool, duration, int, secretKeys, variable } from './variable.js';

export const WEBHOOKS_VARIABLES = {
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
};
