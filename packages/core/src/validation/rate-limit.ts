/** Rate-limit body (C-241): {requests_per_minute}, an integer from 1 to 1,000,000, or null for the default. */
import { z } from 'zod';
import { RATE_LIMIT_MAX } from '../domain/organisation.js';
import { checkBody, type Checked } from './issues.js';

export const ISSUE_REQUESTS_PER_MINUTE = `must be null or an integer from 1 to ${RATE_LIMIT_MAX}`;

/** A limit per minute, an organisation's (C-241) or a key's (C-290): an integer from 1 to RATE_LIMIT_MAX, or null for none. */
export const perMinuteSchema = z
  .number({ error: ISSUE_REQUESTS_PER_MINUTE })
  .int({ error: ISSUE_REQUESTS_PER_MINUTE })
  .min(1, { error: ISSUE_REQUESTS_PER_MINUTE })
  .max(RATE_LIMIT_MAX, { error: ISSUE_REQUESTS_PER_MINUTE })
  .nullable();

const rateLimitSchema = z
  .strictObject({ requests_per_minute: perMinuteSchema })
  .transform((b): number | null => b.requests_per_minute);

/** The organisation's own limit the body asks for (null: back to the default); the field is required. */
export function checkRateLimit(body: unknown): Checked<number | null> {
  return checkBody(rateLimitSchema, body);
}
