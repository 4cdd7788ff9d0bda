/** Path identifiers (C-8): UUIDs, upper case accepted and normalised to lower case. */
import { z } from 'zod';
import { invalid, valid, type Checked } from './issues.js';

export const ISSUE_UUID = 'must be a UUID';

const uuid = z.guid();

export function checkUuid(value: unknown, field: string): Checked<string> {
  if (typeof value !== 'string' || !uuid.safeParse(value).success) return invalid([{ field, issue: ISSUE_UUID }]);
  return valid(value.toLowerCase());
}
