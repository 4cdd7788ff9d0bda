/** Member body (C-21): {email}. */
import { z } from 'zod';
import { EMAIL_MAX, EMAIL_PATTERN } from '../domain/member.js';
import { checkBody, type Checked } from './issues.js';

export const ISSUE_EMAIL = `must be an e-mail address of at most ${EMAIL_MAX} characters`;

export const addMemberSchema = z.strictObject({
  email: z
    .string({ error: ISSUE_EMAIL })
    .trim()
    .max(EMAIL_MAX, { error: ISSUE_EMAIL })
    .regex(EMAIL_PATTERN, { error: ISSUE_EMAIL }),
});

/** A valid member body: `email` trimmed. Spelled out so that the public .d.ts names no internal schema. */
export interface AddMemberInput {
  email: string;
}

export function checkAddMember(body: unknown): Checked<AddMemberInput> {
  return checkBody(addMemberSchema, body);
}
