/**
 * Key policy body (C-62): {max_lifetime_seconds, allowed_environments, exposure_response} required;
 * expiry_notice_seconds (C-280) optional, its default when absent (a PUT replaces the whole policy).
 */
import { z } from 'zod';
import type { KeyEnvironment } from '../domain/api-key.js';
import {
  DEFAULT_KEY_POLICY,
  EXPOSURE_RESPONSES,
  MAX_EXPIRY_NOTICE_SECONDS,
  MAX_POLICY_LIFETIME_SECONDS,
  MIN_POLICY_LIFETIME_SECONDS,
  type ExposureResponse,
  type KeyPolicy,
} from '../domain/key-policy.js';
import { checkBody, type Checked } from './issues.js';

export const ISSUE_MAX_LIFETIME = `must be null or an integer from ${MIN_POLICY_LIFETIME_SECONDS} to ${MAX_POLICY_LIFETIME_SECONDS}`;
export const ISSUE_ALLOWED_ENVIRONMENTS = "must be a non-empty array of 'live' and 'test' without duplicates";
export const ISSUE_EXPOSURE_RESPONSE = "must be 'revoke_key' or 'revoke_key_and_descendants'";
export const ISSUE_EXPIRY_NOTICE = `must be an integer from 0 to ${MAX_EXPIRY_NOTICE_SECONDS}`;

const ENVIRONMENTS: readonly KeyEnvironment[] = ['live', 'test'];

const keyPolicySchema = z
  .strictObject({
    max_lifetime_seconds: z
      .number({ error: ISSUE_MAX_LIFETIME })
      .int({ error: ISSUE_MAX_LIFETIME })
      .min(MIN_POLICY_LIFETIME_SECONDS, { error: ISSUE_MAX_LIFETIME })
      .max(MAX_POLICY_LIFETIME_SECONDS, { error: ISSUE_MAX_LIFETIME })
      .nullable(),
    allowed_environments: z
      .array(z.enum(['live', 'test'], { error: ISSUE_ALLOWED_ENVIRONMENTS }), { error: ISSUE_ALLOWED_ENVIRONMENTS })
      .min(1, { error: ISSUE_ALLOWED_ENVIRONMENTS })
      .refine((list) => new Set(list).size === list.length, { error: ISSUE_ALLOWED_ENVIRONMENTS }),
    exposure_response: z.enum(EXPOSURE_RESPONSES as [ExposureResponse, ...ExposureResponse[]], { error: ISSUE_EXPOSURE_RESPONSE }),
    expiry_notice_seconds: z
      .number({ error: ISSUE_EXPIRY_NOTICE })
      .int({ error: ISSUE_EXPIRY_NOTICE })
      .min(0, { error: ISSUE_EXPIRY_NOTICE })
      .max(MAX_EXPIRY_NOTICE_SECONDS, { error: ISSUE_EXPIRY_NOTICE })
      .optional(),
  })
  .transform(
    (b): KeyPolicy => ({
      maxLifetimeSeconds: b.max_lifetime_seconds,
      allowedEnvironments: ENVIRONMENTS.filter((e) => b.allowed_environments.includes(e)),
      exposureResponse: b.exposure_response,
      expiryNoticeSeconds: b.expiry_notice_seconds ?? DEFAULT_KEY_POLICY.expiryNoticeSeconds,
    }),
  );

/** A PUT replaces the whole policy; environments come back in a fixed order. */
export function checkKeyPolicy(body: unknown): Checked<KeyPolicy> {
  return checkBody(keyPolicySchema, body);
}
