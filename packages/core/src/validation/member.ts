/** Member body (C-21): {email}. */
import { z } from 'zod';
import { EMAIL_MAX, EMAIL_PATTERN } from '../domain/member.js';
import { checkBody, hasNoControlCharacters, type Checked } from './issues.js';

export const ISSUE_EMAIL = `must be an e-mail address of at most ${EMAIL_MAX} characters`;

const addMemberSchema = z.strictObject({
  email: z
    .string({ error: ISSUE_EMAIL })
    .trim()
    .max(EMAIL_MAX, { error: ISSUE_EMAIL })
    .regex(EMAIL_PATTERN, { error: ISSUE_EMAIL })
    // EMAIL_PATTERN excludes blanks only: U+0000, which Postgres text cannot hold, and every other
    // control character are refused here, with the field's own issue, on every store (C-121).
    .refine(hasNoControlCharacters, { error: ISSUE_EMAIL }),
});

/** A valid member body: `email` trimmed. Spelled out so that the public .d.ts names no internal schema. */
export interface AddMemberInput {
  email: string;
}

export function checkAddMember(body: unknown): Checked<AddMemberInput> {
  return checkBody(addMemberSchema, body);
}
