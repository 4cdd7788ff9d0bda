/** Issuance body (C-23): {label, expires_at?, environment?}. */
import { z } from 'zod';
import { LABEL_MAX, MAX_ROLL_GRACE_SECONDS, type KeyEnvironment } from '../domain/api-key.js';
import { ALL_BUILTIN_SCOPES, sortedScopes } from '../domain/scopes.js';
import { checkBody, hasNoControlCharacters, ISSUE_CONTROL_CHARACTERS, type Checked } from './issues.js';

export const ISSUE_LABEL = `must be a string of 1 to ${LABEL_MAX} characters`;
export const ISSUE_EXPIRES_AT = 'must be an ISO 8601 timestamp in the future';
export const ISSUE_ENVIRONMENT = "must be 'live' or 'test'";

export const ISSUE_GRACE_PERIOD = `must be an integer from 0 to ${MAX_ROLL_GRACE_SECONDS}`;
export const ISSUE_SCOPES = 'must be a non-empty array of known scopes without duplicates';

export interface IssueKeyInput {
  readonly label: string;
  readonly expiresAt: Date | null;
  readonly environment: KeyEnvironment;
  /** Sorted; null when the body names none (the issuer's own scopes apply). */
  readonly scopes: readonly string[] | null;
  /** True when the body named `expires_at` (null included): false lets a policy or the issuer's expiry apply. */
  readonly expiresAtGiven: boolean;
}

/**
 * `scopes` (C-60): a non-empty array of names from `known` without duplicates; any other value is
 * the one detail ISSUE_SCOPES. The result is sorted.
 */
function scopesSchema(known: readonly string[]) {
  const names = new Set(known);
  return z
    .array(z.string({ error: ISSUE_SCOPES }), { error: ISSUE_SCOPES })
    .min(1, { error: ISSUE_SCOPES })
    .refine((list) => list.every((s) => names.has(s)) && new Set(list).size === list.length, { error: ISSUE_SCOPES })
    .transform((list) => sortedScopes(list));
}

/** A key's label (C-23): trimmed, 1 to 100 characters, no control characters. */
const labelSchema = z
  .string({ error: ISSUE_LABEL })
  .trim()
  .min(1, { error: ISSUE_LABEL })
  .max(LABEL_MAX, { error: ISSUE_LABEL })
  .refine(hasNoControlCharacters, { error: ISSUE_CONTROL_CHARACTERS });

/** The schema depends on `now` (expires_at must lie after it) and on the process's known scopes. */
function issueKeySchema(now: Date, known: readonly string[] = ALL_BUILTIN_SCOPES) {
  return z
    .strictObject({
      label: labelSchema,
      expires_at: z
        .iso.datetime({ offset: true, error: ISSUE_EXPIRES_AT })
        .transform((s) => new Date(s))
        .refine((d) => !Number.isNaN(d.getTime()) && d.getTime() > now.getTime(), { error: ISSUE_EXPIRES_AT })
        .nullable()
        .optional(),
      environment: z.enum(['live', 'test'], { error: ISSUE_ENVIRONMENT }).optional(),
      scopes: scopesSchema(known).optional(),
    })
    .transform(
      (b): IssueKeyInput => ({
        label: b.label,
        expiresAt: b.expires_at ?? null,
        environment: b.environment ?? 'live',
        scopes: b.scopes ?? null,
        expiresAtGiven: b.expires_at !== undefined,
      }),
    );
}

/** `expires_at: null` is accepted as "no expiry"; environment defaults to 'live'; `scopes` must be known. */
export function checkIssueKey(body: unknown, now: Date, known?: readonly string[]): Checked<IssueKeyInput> {
  return checkBody(issueKeySchema(now, known), body);
}

/** Roll body: {grace_period_seconds?, label?}; the new key keeps the old label unless one is given. */
export interface RollKeyInput {
  readonly gracePeriodSeconds: number;
  readonly label: string | null;
  /** Sorted; null: the old key's scopes. */
  readonly scopes: readonly string[] | null;
}

function rollKeySchema(known: readonly string[] = ALL_BUILTIN_SCOPES) {
  return z
  .strictObject({
    grace_period_seconds: z
      .number({ error: ISSUE_GRACE_PERIOD })
      .int({ error: ISSUE_GRACE_PERIOD })
      .min(0, { error: ISSUE_GRACE_PERIOD })
      .max(MAX_ROLL_GRACE_SECONDS, { error: ISSUE_GRACE_PERIOD })
      .optional(),
    label: labelSchema.optional(),
    scopes: scopesSchema(known).optional(),
  })
  .transform((b): RollKeyInput => ({ gracePeriodSeconds: b.grace_period_seconds ?? 0, label: b.label ?? null, scopes: b.scopes ?? null }));
}

/** Grace defaults to 0 (the old key stops at once). */
export function checkRollKey(body: unknown, known?: readonly string[]): Checked<RollKeyInput> {
  return checkBody(rollKeySchema(known), body);
}
