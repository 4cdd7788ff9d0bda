/**
 * The key list's query (C-283): the list query (limit, cursor) and `expiring_within`, a duration
 * from one second to 3650 days written either as an ISO 8601 duration of weeks, days, hours,
 * minutes and seconds (`P7D`, `PT12H`, `P1DT12H`, `P2W`, `P1W2D`: upper case, whole numbers, each
 * unit at most once and in that order; no years or months, whose length varies) or as whole seconds
 * (`604800`). The same units as `cos-admin`'s duration grammar (`7d`, `12h`, `1d12h`, `2w`).
 */
import type { ErrorDetail } from '../domain/errors.js';
import { invalid, isJsonObject, valid, type Checked } from './issues.js';
import { checkListQuery, type ListQuery } from './query.js';

/** The longest `expiring_within` (3650 days), which the CLI's `--expiring-within` shares. */
export const MAX_EXPIRING_WITHIN_SECONDS = 3650 * 86_400;
export const ISSUE_EXPIRING_WITHIN = `must be an ISO 8601 duration such as P7D, PT12H or P1DT12H, or whole seconds, from 1 second to 3650 days`;

const ISO_DURATION = /^P(?:(\d{1,6})W)?(?:(\d{1,6})D)?(?:T(?=\d)(?:(\d{1,6})H)?(?:(\d{1,6})M)?(?:(\d{1,6})S)?)?$/;
const SECONDS = /^\d{1,10}$/;
const UNIT_SECONDS = [604_800, 86_400, 3_600, 60, 1] as const;

/** `expiring_within` as seconds, or null when it is not in the grammar or out of bounds. */
function expiringWithinSeconds(value: unknown): number | null {
  if (typeof value !== 'string') return null;
  let seconds: number;
  if (SECONDS.test(value)) seconds = Number(value);
  else {
    const m = ISO_DURATION.exec(value);
    if (m === null || value === 'P') return null;
    seconds = m.slice(1).reduce((sum, part, i) => sum + (part === undefined ? 0 : Number(part) * UNIT_SECONDS[i]!), 0);
  }
  return seconds >= 1 && seconds <= MAX_EXPIRING_WITHIN_SECONDS ? seconds : null;
}

interface KeyListQuery extends ListQuery {
  /** Only keys active now that expire within this many seconds. */
  readonly expiringWithinSeconds?: number;
}

/** {limit?, cursor?, expiring_within?}: every bad parameter reported together; unknown ones ignored. */
export function checkKeyListQuery(query: unknown): Checked<KeyListQuery> {
  const list = checkListQuery(query);
  const raw = isJsonObject(query) ? query['expiring_within'] : undefined;
  if (raw === undefined) return list;
  const seconds = expiringWithinSeconds(raw);
  const details: ErrorDetail[] = list.ok ? [] : [...list.details];
  if (seconds === null) details.push({ field: 'expiring_within', issue: ISSUE_EXPIRING_WITHIN });
  if (!list.ok || seconds === null) return invalid(details);
  return valid({ ...list.value, expiringWithinSeconds: seconds });
}
