/** Path identifiers (C-8): UUIDs, upper case accepted and normalised to lower case. */
import { z } from 'zod';
import { invalid, valid, type Checked } from './issues.js';

export const ISSUE_UUID = 'must be a UUID';

/** What `z.guid()` accepts (8-4-4-4-12 hex digits, any version): its own pattern, tested without a parse. */
const GUID = z.regexes.guid;

export function checkUuid(value: unknown, field: string): Checked<string> {
  if (typeof value !== 'string' || !GUID.test(value)) return invalid([{ field, issue: ISSUE_UUID }]);
  return valid(value.toLowerCase());
}
