/** Issuance body (C-23): {label, expires_at?, environment?}. */
import { z } from 'zod';
import { LABEL_MAX, type KeyEnvironment } from '../domain/api-key.js';
import { checkBody, hasNoControlCharacters, ISSUE_CONTROL_CHARACTERS, type Checked } from './issues.js';

export const ISSUE_LABEL = `must be a string of 1 to ${LABEL_MAX} characters`;
export const ISSUE_EXPIRES_AT = 'must be an ISO 8601 timestamp in the future';
export const ISSUE_ENVIRONMENT = "must be 'live' or 'test'";

export interface IssueKeyInput {
  readonly label: string;
  readonly expiresAt: Date | null;
  readonly environment: KeyEnvironment;
}

/** The schema depends on `now`: expires_at must lie after it. */
export function issueKeySchema(now: Date) {
  return z
    .strictObject({
      label: z
        .string({ error: ISSUE_LABEL })
        .trim()
        .min(1, { error: ISSUE_LABEL })
        .max(LABEL_MAX, { error: ISSUE_LABEL })
        .refine(hasNoControlCharacters, { error: ISSUE_CONTROL_CHARACTERS }),
      expires_at: z
        .iso.datetime({ offset: true, error: ISSUE_EXPIRES_AT })
        .transform((s) => new Date(s))
        .refine((d) => !Number.isNaN(d.getTime()) && d.getTime() > now.getTime(), { error: ISSUE_EXPIRES_AT })
        .nullable()
        .optional(),
      environment: z.enum(['live', 'test'], { error: ISSUE_ENVIRONMENT }).optional(),
    })
    .transform(
      (b): IssueKeyInput => ({ label: b.label, expiresAt: b.expires_at ?? null, environment: b.environment ?? 'live' }),
    );
}

/** `expires_at: null` is accepted as "no expiry"; environment defaults to 'live'. */
export function checkIssueKey(body: unknown, now: Date): Checked<IssueKeyInput> {
  return checkBody(issueKeySchema(now), body);
}
