/**
 * Secret-scanning alerts: where the programme's public keys come from, how often they are fetched
 * again and how many alerts a minute are taken.
 */
import { z } from 'zod';
import { duration, int, INT_MAX, orNull, url, variable } from './variable.js';

export const SECRET_SCANNING_VARIABLES = {
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
};
