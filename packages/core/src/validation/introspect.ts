/** The body of POST /v1/introspect (C-272): {token, count?, source_address?, token_type_hint?}. */
import { isIP } from 'node:net';
import { z } from 'zod';
import { wellFormedText } from '../domain/text.js';
import { checkBody, valid, type Checked } from './issues.js';

/** Longest token accepted: far above a key's 57 characters, so that any token a gateway holds fits. */
export const MAX_INTROSPECTED_TOKEN_LENGTH = 512;
export const ISSUE_INTROSPECTED_TOKEN = `must be a string of 1 to ${MAX_INTROSPECTED_TOKEN_LENGTH} characters`;
export const ISSUE_INTROSPECT_COUNT = 'must be true or false';
export const ISSUE_INTROSPECT_SOURCE_ADDRESS = 'must be an IPv4 or IPv6 address';
const ISSUE_INTROSPECT_TOKEN_TYPE_HINT = `must be a string of at most ${MAX_INTROSPECTED_TOKEN_LENGTH} characters`;

interface IntrospectInput {
  readonly token: string;
  readonly count: boolean;
  /** The address the token's holder called the asking service from, or null. */
  readonly sourceAddress: string | null;
}

const introspectSchema = z
  .strictObject({
    token: z.string({ error: ISSUE_INTROSPECTED_TOKEN }).min(1, { error: ISSUE_INTROSPECTED_TOKEN }).max(MAX_INTROSPECTED_TOKEN_LENGTH, { error: ISSUE_INTROSPECTED_TOKEN }),
    count: z.boolean({ error: ISSUE_INTROSPECT_COUNT }).optional(),
    source_address: z
      .string({ error: ISSUE_INTROSPECT_SOURCE_ADDRESS })
      .max(64, { error: ISSUE_INTROSPECT_SOURCE_ADDRESS })
      .refine((s) => isIP(s) !== 0, { error: ISSUE_INTROSPECT_SOURCE_ADDRESS })
      .optional(),
    // RFC 7662 §2.1 lets a caller hint at the token's type; there is one type, so it is accepted and ignored.
    token_type_hint: z.string({ error: ISSUE_INTROSPECT_TOKEN_TYPE_HINT }).max(MAX_INTROSPECTED_TOKEN_LENGTH, { error: ISSUE_INTROSPECT_TOKEN_TYPE_HINT }).optional(),
  })
  .transform((b): IntrospectInput => ({ token: b.token, count: b.count ?? false, sourceAddress: b.source_address ?? null }));

/**
 * The body a gateway sends on every call, `{"token": …}` with `count` or not, read without the
 * schema: exactly the input the schema would give for it (every rule of those two fields is checked
 * here; the token made well-formed as checkBody does). Null for anything else (another field, a
 * value of another type or length), which the schema then reads, with its errors.
 */
function commonIntrospect(body: unknown): IntrospectInput | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const record = body as Record<string, unknown>;
  for (const name in record) {
    if (name !== 'token' && name !== 'count') return null;
  }
  const { token, count } = record;
  if (typeof token !== 'string' || token.length === 0 || token.length > MAX_INTROSPECTED_TOKEN_LENGTH) return null;
  if (count !== undefined && typeof count !== 'boolean') return null;
  return { token: wellFormedText(token), count: count ?? false, sourceAddress: null };
}

/**
 * The token to look up before the caller is admitted (C-274): that of a common body that counts
 * nothing, as its reading gives it; null for any other body, whose token waits for admission.
 */
export function tokenToLookAhead(body: unknown): string | null {
  const common = commonIntrospect(body);
  return common !== null && !common.count ? common.token : null;
}

/** Only `token` is required; `count` defaults to false. */
export function checkIntrospect(body: unknown): Checked<IntrospectInput> {
  const common = commonIntrospect(body);
  return common !== null ? valid(common) : checkBody(introspectSchema, body);
}
