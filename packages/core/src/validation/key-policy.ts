/** Key policy body (C-62): {max_lifetime_seconds, allowed_environments, exposure_response}, all required. */
import { z } from 'zod';
import type { KeyEnvironment } from '../domain/api-key.js';
import {
  EXPOSURE_RESPONSES,
  MAX_POLICY_LIFETIME_SECONDS,
  MIN_POLICY_LIFETIME_SECONDS,
  type ExposureResponse,
  type KeyPolicy,
} from '../domain/key-policy.js';
import { checkBody, type Checked } from './issues.js';

export const ISSUE_MAX_LIFETIME = `must be null or an integer from ${MIN_POLICY_LIFETIME_SECONDS} to ${MAX_POLICY_LIFETIME_SECONDS}`;
export const ISSUE_ALLOWED_ENVIRONMENTS = "must be a non-empty array of 'live' and 'test' without duplicates";
export const ISSUE_EXPOSURE_RESPONSE = "must be 'revoke_key' or 'revoke_key_and_descendants'";

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
  })
  .transform(
    (b): KeyPolicy => ({
      maxLifetimeSeconds: b.max_lifetime_seconds,
      allowedEnvironments: ENVIRONMENTS.filter((e) => b.allowed_environments.includes(e)),
      exposureResponse: b.exposure_response,
    }),
  );

/** Every field required (a PUT replaces the whole policy); environments come back in a fixed order. */
export function checkKeyPolicy(body: unknown): Checked<KeyPolicy> {
  return checkBody(keyPolicySchema, body);
}
