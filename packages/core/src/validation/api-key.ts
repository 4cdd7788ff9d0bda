/** Issuance body (C-23): {label, expires_at?, environment?, scopes?, metadata?, allowed_cidrs?, rate_limit_per_minute?}. */
import { z } from 'zod';
import { LABEL_MAX, MAX_ROLL_GRACE_SECONDS, type KeyEnvironment } from '../domain/api-key.js';
import { ALL_BUILTIN_SCOPES, sortedScopes } from '../domain/scopes.js';
import { all, checkBody, checkThrowing, hasNoControlCharacters, isJsonObject, ISSUE_CONTROL_CHARACTERS, valid, type Checked } from './issues.js';
import { checkAllowedCidrs, checkMetadata, type MetadataInput } from './key-attributes.js';
import { perMinuteSchema } from './rate-limit.js';

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
  /** The key's metadata (C-260); `{}` when the body names none. */
  readonly metadata?: Readonly<Record<string, string>>;
  /** Canonical CIDRs, null for any address (C-262); undefined when the body names none (the issuer's apply). */
  readonly allowedCidrs?: readonly string[] | null;
  /** The key's own limit per minute (C-290), null for none (also when the body names none). */
  readonly rateLimitPerMinute?: number | null;
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
      // Checked by checkMetadata and checkAllowedCidrs, which name the failing entry.
      metadata: z.unknown().optional(),
      allowed_cidrs: z.unknown().optional(),
      rate_limit_per_minute: perMinuteSchema.optional(),
    })
    .transform(
      (b): IssueKeyInput => ({
        label: b.label,
        expiresAt: b.expires_at ?? null,
        environment: b.environment ?? 'live',
        scopes: b.scopes ?? null,
        expiresAtGiven: b.expires_at !== undefined,
        rateLimitPerMinute: b.rate_limit_per_minute ?? null,
      }),
    );
}

/** The checks of `metadata` and `allowed_cidrs` of a body (undefined when absent), reported with the rest. */
function checkAttributes(body: unknown, removals: boolean): [Checked<MetadataInput | undefined>, Checked<readonly string[] | null | undefined>] {
  if (!isJsonObject(body)) return [valid(undefined), valid(undefined)];
  return [
    body.metadata === undefined ? valid(undefined) : checkMetadata(body.metadata, removals),
    body.allowed_cidrs === undefined ? valid(undefined) : checkAllowedCidrs(body.allowed_cidrs),
  ];
}

/**
 * `expires_at: null` is accepted as "no expiry"; environment defaults to 'live'; `scopes` must be
 * known; `metadata` (C-260) and `allowed_cidrs` (C-262) are checked entry by entry.
 */
export function checkIssueKey(body: unknown, now: Date, known?: readonly string[]): Checked<IssueKeyInput> {
  return checkThrowing(() => {
    const [input, metadata, allowedCidrs] = all(checkBody(issueKeySchema(now, known), body), ...checkAttributes(body, false));
    return {
      ...input,
      // Without removals (an issue), checkMetadata answers string values only.
      metadata: (metadata as Readonly<Record<string, string>> | undefined) ?? {},
      ...(allowedCidrs !== undefined ? { allowedCidrs } : {}),
    };
  });
}

/** The fields a key keeps for life: changing them is a roll (C-261). */
export const IMMUTABLE_KEY_FIELDS: readonly string[] = ['scopes', 'environment', 'expires_at'];
export const ISSUE_IMMUTABLE_KEY_FIELD = 'cannot be changed: roll the key to get one with another value';

/** PATCH .../api-keys/{key_id} body (C-261): what to change; an absent field is kept. */
export interface PatchKeyInput {
  readonly label?: string;
  /** Names to set, and (null) to remove. */
  readonly metadata?: MetadataInput;
  readonly allowedCidrs?: readonly string[] | null;
  /** The key's own limit per minute (C-290); null removes it. */
  readonly rateLimitPerMinute?: number | null;
}

const patchKeySchema = z.strictObject({
  label: labelSchema.optional(),
  metadata: z.unknown().optional(),
  allowed_cidrs: z.unknown().optional(),
  rate_limit_per_minute: perMinuteSchema.optional(),
  // Named so that the strict object does not call them extra: they get their own detail.
  scopes: z.unknown().optional(),
  environment: z.unknown().optional(),
  expires_at: z.unknown().optional(),
});

/**
 * `label`, `metadata` (null for a name removes it), `allowed_cidrs` and `rate_limit_per_minute` only; `scopes`,
 * `environment` and `expires_at` are each refused with ISSUE_IMMUTABLE_KEY_FIELD; anything else is
 * an extra field.
 */
export function checkPatchKey(body: unknown): Checked<PatchKeyInput> {
  return checkThrowing(() => {
    const immutable = isJsonObject(body) ? IMMUTABLE_KEY_FIELDS.filter((f) => body[f] !== undefined) : [];
    const fixed: Checked<undefined> = immutable.length === 0 ? valid(undefined) : { ok: false, details: immutable.map((field) => ({ field, issue: ISSUE_IMMUTABLE_KEY_FIELD })) };
    const [b, metadata, allowedCidrs] = all(checkBody(patchKeySchema, body), ...checkAttributes(body, true), fixed);
    return {
      ...(b.label !== undefined ? { label: b.label } : {}),
      ...(metadata !== undefined ? { metadata } : {}),
      ...(allowedCidrs !== undefined ? { allowedCidrs } : {}),
      ...(b.rate_limit_per_minute !== undefined ? { rateLimitPerMinute: b.rate_limit_per_minute } : {}),
    };
  });
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
