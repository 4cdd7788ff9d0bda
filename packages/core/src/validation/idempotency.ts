/** The `Idempotency-Key` request header: 1 to 255 printable ASCII characters (space to tilde). */
import { invalid, valid, type Checked } from './issues.js';

export const IDEMPOTENCY_KEY_FIELD = 'idempotency-key';
export const ISSUE_IDEMPOTENCY_KEY = 'must be 1 to 255 printable ASCII characters';
const PRINTABLE_ASCII = /^[\x20-\x7e]{1,255}$/;

export function checkIdempotencyKey(value: unknown): Checked<string> {
  if (typeof value === 'string' && PRINTABLE_ASCII.test(value)) return valid(value);
  return invalid([{ field: IDEMPOTENCY_KEY_FIELD, issue: ISSUE_IDEMPOTENCY_KEY }]);
}
