/**
 * An organisation's key policy (C-62): the longest life a new key may have, the environments keys
 * may be issued in, what a secret-scanning exposure of a key revokes, and how long before a key
 * expires its `api_key.expiring` notice is sent (C-280). Applied when a key is issued or rolled;
 * keys that exist are never changed by a policy (the notice period applies to every active key).
 */
import type { KeyEnvironment } from './api-key.js';

export type ExposureResponse = 'revoke_key' | 'revoke_key_and_descendants';
export const EXPOSURE_RESPONSES: readonly ExposureResponse[] = Object.freeze(['revoke_key', 'revoke_key_and_descendants']);

export interface KeyPolicy {
  /** Longest lifetime of a new key, seconds; null: no maximum. */
  readonly maxLifetimeSeconds: number | null;
  /** Sorted, non-empty, without duplicates. */
  readonly allowedEnvironments: readonly KeyEnvironment[];
  readonly exposureResponse: ExposureResponse;
  /** An active key with this many seconds or fewer left gets one `api_key.expiring` notice; 0: none. */
  readonly expiryNoticeSeconds: number;
}

/** The policy of an organisation that never set one. */
export const DEFAULT_KEY_POLICY: KeyPolicy = Object.freeze({
  maxLifetimeSeconds: null,
  allowedEnvironments: Object.freeze(['live', 'test'] as KeyEnvironment[]),
  exposureResponse: 'revoke_key',
  expiryNoticeSeconds: 604_800,
});

/** Bounds of expiry_notice_seconds: 0 (no notices) to 90 days. */
export const MAX_EXPIRY_NOTICE_SECONDS = 7_776_000;

/** Bounds of max_lifetime_seconds: one hour to two years (730 days). */
export const MIN_POLICY_LIFETIME_SECONDS = 3_600;
export const MAX_POLICY_LIFETIME_SECONDS = 63_072_000;

/** A lifetime in seconds as people write it, in the largest unit that divides it exactly: 7776000 -> "90d", 5400 -> "90m". */
export function lifetimeText(seconds: number): string {
  if (seconds % 86_400 === 0) return `${seconds / 86_400}d`;
  if (seconds % 3_600 === 0) return `${seconds / 3_600}h`;
  return seconds % 60 === 0 ? `${seconds / 60}m` : `${seconds}s`;
}
