/** Rate-limit body (C-241): {requests_per_minute}, an integer from 1 to 1,000,000, or null for the default. */
import { z } from 'zod';
import { RATE_LIMIT_MAX } from '../domain/organisation.js';
import { checkBody, type Checked } from './issues.js';

export const ISSUE_REQUESTS_PER_MINUTE = `must be null or an integer from 1 to ${RATE_LIMIT_MAX}`;

const rateLimitSchema = z
  .strictObject({
    requests_per_minute: z
      .number({ error: ISSUE_REQUESTS_PER_MINUTE })
      .int({ error: ISSUE_REQUESTS_PER_MINUTE })
      .min(1, { error: ISSUE_REQUESTS_PER_MINUTE })
      .max(RATE_LIMIT_MAX, { error: ISSUE_REQUESTS_PER_MINUTE })
      .nullable(),
  })
  .transform((b): number | null => b.requests_per_minute);

/** The organisation's own limit the body asks for (null: back to the default); the field is required. */
export function checkRateLimit(body: unknown): Checked<number | null> {
  return checkBody(rateLimitSchema, body);
}
