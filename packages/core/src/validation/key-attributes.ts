/**
 * A key's editable attributes besides its label: `metadata` (C-260) and `allowed_cidrs` (C-262).
 * Each failing entry is reported with its own field path (`metadata.owner`, `allowed_cidrs.2`), all
 * at once.
 */
import { METADATA_MAX_KEYS, METADATA_NAME_PATTERN, METADATA_VALUE_MAX } from '../domain/api-key.js';
import type { ErrorDetail } from '../domain/errors.js';
import { ISSUE_CIDR, MAX_ALLOWED_CIDRS, parseCidr, uniqueCidrs } from '../domain/key-network.js';
import { wellFormedText } from '../domain/text.js';
import { hasNoControlCharacters, invalid, isJsonObject, valid, type Checked } from './issues.js';

const ISSUE_METADATA = 'must be an object of string to string';
export const ISSUE_METADATA_SIZE = `must hold at most ${METADATA_MAX_KEYS} entries`;
const ISSUE_METADATA_NAME = "name must be 1 to 40 characters of A-Z, a-z, 0-9, '_', '.' and '-'";
const ISSUE_METADATA_VALUE = `must be a string of at most ${METADATA_VALUE_MAX} characters without control characters`;
const ISSUE_METADATA_VALUE_OR_NULL = `must be a string of at most ${METADATA_VALUE_MAX} characters without control characters, or null to remove it`;
const ISSUE_ALLOWED_CIDRS = `must be an array of 1 to ${MAX_ALLOWED_CIDRS} CIDRs, or null for any address`;

/** Metadata as given: a value per name, null (PATCH only) to remove the name. */
export type MetadataInput = Readonly<Record<string, string | null>>;

/**
 * `metadata`: an object of at most METADATA_MAX_KEYS names (1-40 characters of `[A-Za-z0-9_.-]`),
 * each a string of at most METADATA_VALUE_MAX characters; with `removals`, a value may also be null.
 * The entry count of an issue is checked here; a PATCH's applies to the merged result.
 */
export function checkMetadata(value: unknown, removals: boolean): Checked<MetadataInput> {
  if (!isJsonObject(value)) return invalid([{ field: 'metadata', issue: ISSUE_METADATA }]);
  const entries = Object.entries(value);
  const details: ErrorDetail[] = [];
  if (!removals && entries.length > METADATA_MAX_KEYS) details.push({ field: 'metadata', issue: ISSUE_METADATA_SIZE });
  const out: [string, string | null][] = [];
  for (const [name, v] of entries) {
    if (!METADATA_NAME_PATTERN.test(name)) {
      details.push({ field: `metadata.${name.slice(0, 64)}`, issue: ISSUE_METADATA_NAME });
    } else if (v === null && removals) {
      out.push([name, null]);
    } else if (typeof v !== 'string' || v.length > METADATA_VALUE_MAX || !hasNoControlCharacters(v)) {
      details.push({ field: `metadata.${name}`, issue: removals ? ISSUE_METADATA_VALUE_OR_NULL : ISSUE_METADATA_VALUE });
    } else {
      out.push([name, wellFormedText(v)]);
    }
  }
  // fromEntries defines own properties, so a name such as `__proto__` is an entry like any other.
  return details.length > 0 ? invalid(details) : valid(Object.fromEntries(out));
}

/**
 * `allowed_cidrs`: null (any address) or an array of 1 to MAX_ALLOWED_CIDRS CIDRs, each normalised
 * (parseCidr: a network whose host bits are not zero is refused, never widened); duplicates after
 * normalisation are kept once.
 */
export function checkAllowedCidrs(value: unknown): Checked<readonly string[] | null> {
  if (value === null) return valid(null);
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_ALLOWED_CIDRS) return invalid([{ field: 'allowed_cidrs', issue: ISSUE_ALLOWED_CIDRS }]);
  const details: ErrorDetail[] = [];
  const cidrs: string[] = [];
  value.forEach((item: unknown, i) => {
    const parsed = typeof item === 'string' && item.length <= 64 ? parseCidr(item) : null;
    if (parsed === null || !parsed.ok) details.push({ field: `allowed_cidrs.${i}`, issue: parsed === null ? ISSUE_CIDR : parsed.issue });
    else cidrs.push(parsed.cidr);
  });
  return details.length > 0 ? invalid(details) : valid(uniqueCidrs(cidrs));
}
