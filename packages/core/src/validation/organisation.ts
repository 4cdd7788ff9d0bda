/** Organisation bodies (C-11..C-14) and the classification argument (C-24). */
import { z } from 'zod';
import { NAME_MAX, SLUG_MAX, SLUG_PATTERN, isNaceSection, type NaceSection } from '../domain/organisation.js';
import { checkBody, hasNoControlCharacters, invalid, ISSUE_CONTROL_CHARACTERS, valid, type Checked } from './issues.js';

export const ISSUE_NAME = `must be a string of 1 to ${NAME_MAX} characters`;
export const ISSUE_SLUG = `must be 1 to ${SLUG_MAX} characters of a-z, 0-9 and '-', not starting or ending with '-'`;
export const ISSUE_SECTION = "must be a NACE section letter A to U, or 'none'";

const name = z
  .string({ error: ISSUE_NAME })
  .trim()
  .min(1, { error: ISSUE_NAME })
  .max(NAME_MAX, { error: ISSUE_NAME })
  .refine(hasNoControlCharacters, { error: ISSUE_CONTROL_CHARACTERS });
const slug = z.string({ error: ISSUE_SLUG }).regex(SLUG_PATTERN, { error: ISSUE_SLUG });

/** POST /organisations: {name, slug}; industry_section, is_system, id... are extra fields (C-12). */
const createOrganisationSchema = z.strictObject({ name, slug });
/** PUT: {name} required; slug, industry_section, is_system, id are extra fields (C-12, C-14). */
const replaceOrganisationSchema = z.strictObject({ name });
/** PATCH: {name?}; `{}` is valid and changes nothing (C-14). */
const patchOrganisationSchema = z.strictObject({ name: name.optional() });

// Spelled out (not z.output<typeof schema>) so that the public .d.ts names no internal schema.
// The check functions below return checkBody(schema) as these types, so a schema that stops
// producing one of their fields (or changes its type) no longer compiles.
/** A valid POST /organisations body: `name` trimmed. */
export interface CreateOrganisationInput {
  name: string;
  slug: string;
}
/** A valid PUT body: `name` trimmed. */
export interface ReplaceOrganisationInput {
  name: string;
}
/** A valid PATCH body: `name` trimmed, absent when not sent. */
export interface PatchOrganisationInput {
  name?: string | undefined;
}

export function checkCreateOrganisation(body: unknown): Checked<CreateOrganisationInput> {
  return checkBody(createOrganisationSchema, body);
}

export function checkReplaceOrganisation(body: unknown): Checked<ReplaceOrganisationInput> {
  return checkBody(replaceOrganisationSchema, body);
}

export function checkPatchOrganisation(body: unknown): Checked<PatchOrganisationInput> {
  return checkBody(patchOrganisationSchema, body);
}

/** 'A'..'U' (any case, surrounding blanks ignored) or 'none' (-> null), else field 'section'. */
export function checkSection(value: unknown): Checked<NaceSection | null> {
  if (typeof value === 'string') {
    const v = value.trim().toUpperCase();
    if (v === 'NONE') return valid(null);
    if (isNaceSection(v)) return valid(v);
  }
  return invalid([{ field: 'section', issue: ISSUE_SECTION }]);
}
