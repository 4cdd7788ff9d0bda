/**
 * From zod issues to the contract's `details: [{field, issue}]` (C-11): one detail per failing
 * field, every failing field at once, fixed texts for unknown and missing fields.
 */
import type { z } from 'zod';
import { isDomainErrorWithCode, ValidationError, type ErrorDetail } from '../domain/errors.js';
import { wellFormedStrings } from '../domain/text.js';

export const ISSUE_EXTRA_FIELD = 'extra fields not permitted';
export const ISSUE_FIELD_REQUIRED = 'field required';
export const ISSUE_NOT_AN_OBJECT = 'must be a JSON object';
export const ISSUE_CONTROL_CHARACTERS = 'must not contain control characters';

/**
 * Control characters (C0, DEL, C1; U+0000 included): never part of a name or label. Postgres text
 * cannot hold U+0000 at all, so one rule for every store refuses them all.
 */
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/;

/** True when `text` holds no control character. */
export function hasNoControlCharacters(text: string): boolean {
  return !CONTROL_CHARACTERS.test(text);
}

/** The outcome of one validation step; failures carry their details so several steps can be merged. */
export type Checked<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly details: readonly ErrorDetail[] };

export function valid<T>(value: T): Checked<T> {
  return { ok: true, value };
}

export function invalid<T = never>(details: readonly ErrorDetail[]): Checked<T> {
  return { ok: false, details };
}

/** A JSON object: not null, not an array, not a primitive. */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isMissing(input: Record<string, unknown>, field: string): boolean {
  return !Object.hasOwn(input, field) || input[field] === undefined;
}

/**
 * Maps zod issues over a flat object to details. Unknown keys -> "extra fields not permitted";
 * a failing field that is absent -> "field required"; otherwise the schema's own short message.
 * The first issue of a field wins, so each field appears once.
 */
export function detailsFromIssues(input: Record<string, unknown>, issues: readonly z.core.$ZodIssue[]): ErrorDetail[] {
  const byField = new Map<string, string>();
  const add = (field: string, issue: string): void => {
    if (!byField.has(field)) byField.set(field, issue);
  };
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys' && issue.path.length === 0) {
      for (const key of issue.keys) add(key, ISSUE_EXTRA_FIELD);
      continue;
    }
    const head = issue.path[0];
    if (head === undefined) {
      add('body', ISSUE_NOT_AN_OBJECT);
      continue;
    }
    const field = String(head);
    add(field, isMissing(input, field) ? ISSUE_FIELD_REQUIRED : issue.message);
  }
  return [...byField].map(([field, issue]) => ({ field, issue }));
}

/** Parses a JSON-object body with a (strict) object schema. */
export function checkBody<S extends z.ZodType>(schema: S, body: unknown): Checked<z.output<S>> {
  if (!isJsonObject(body)) return invalid([{ field: 'body', issue: ISSUE_NOT_AN_OBJECT }]);
  const result = schema.safeParse(body);
  // What is stored is well-formed text (C-121), whoever called: a lone surrogate becomes U+FFFD.
  if (result.success) return valid(wellFormedStrings(result.data));
  return invalid(detailsFromIssues(body, result.error.issues));
}

/** Runs a step that may throw ValidationError (e.g. decodeCursor) and turns it into a Checked. */
export function checkThrowing<T>(step: () => T): Checked<T> {
  try {
    return valid(step());
  } catch (e) {
    if (isDomainErrorWithCode(e, 'VALIDATION_ERROR')) return invalid(e.details);
    throw e;
  }
}

/** The value of a successful check, or throws a ValidationError. */
export function unwrap<T>(checked: Checked<T>): T {
  if (checked.ok) return checked.value;
  throw new ValidationError(checked.details);
}

type Values<T extends readonly Checked<unknown>[]> = { -readonly [K in keyof T]: T[K] extends Checked<infer V> ? V : never };

/**
 * Several independent checks (path ids, body, query) reported together (C-11): all their details
 * in one ValidationError, one per field (the first wins), or all values.
 */
export function all<T extends readonly Checked<unknown>[]>(...checks: T): Values<T> {
  if (checks.every((c) => c.ok)) return checks.map((c) => (c as { value: unknown }).value) as Values<T>;
  const details: ErrorDetail[] = [];
  const seen = new Set<string>();
  for (const c of checks) {
    if (c.ok) continue;
    for (const d of c.details) {
      if (seen.has(d.field)) continue;
      seen.add(d.field);
      details.push(d);
    }
  }
  if (details.length > 0) throw new ValidationError(details);
  return checks.map((c) => (c as { value: unknown }).value) as Values<T>;
}
