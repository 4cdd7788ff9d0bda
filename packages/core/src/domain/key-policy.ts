/**
 * An organisation's key policy (C-62): the longest life a new key may have, the environments keys
 * may be issued in, and what a secret-scanning exposure of a key revokes. Applied when a key is
 * issued or rolled; keys that exist are never changed by a policy.
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
}

/** The policy of an organisation that never set one. */
export const DEFAULT_KEY_POLICY: KeyPolicy = Object.freeze({
  maxLifetimeSeconds: null,
  allowedEnvironments: Object.freeze(['live', 'test'] as KeyEnvironment[]),
  exposureResponse: 'revoke_key',
});

/** Bounds of max_lifetime_seconds: one hour to two years (730 days). */
export const MIN_POLICY_LIFETIME_SECONDS = 3_600;
export const MAX_POLICY_LIFETIME_SECONDS = 63_072_000;

/** A lifetime in seconds as people write it, in the largest unit that divides it exactly: 7776000 -> "90d", 5400 -> "90m". */
export function lifetimeText(seconds: number): string {
  if (seconds % 86_400 === 0) return `${seconds / 86_400}d`;
  if (seconds % 3_600 === 0) return `${seconds / 3_600}h`;
  return seconds % 60 === 0 ? `${seconds / 60}m` : `${seconds}s`;
}
