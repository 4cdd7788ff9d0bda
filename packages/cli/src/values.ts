/**
 * The values of `cos-admin`'s command lines: one grammar for durations, one for timestamps, and the
 * checks of the other values the command line can judge by itself (page size, NACE section, UUIDs,
 * choices). Each parser is a commander argParser, of an option or of an argument: a malformed value
 * throws InvalidArgumentError, which commander reports naming the option ("option '--grace
 * <duration>' argument '8d' is invalid. …") or the argument ("command-argument value 'x' is invalid
 * for argument 'org_id'. …"), and main.ts turns into exit status 2 (EXIT_USAGE), like any other
 * wrong command line. Nothing is opened (no database, no Redis) before they have all passed.
 */
import { InvalidArgumentError } from 'commander';
import { NACE_SECTIONS, RATE_LIMIT_MAX } from '@cos/core';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const WEEK = 7 * DAY;

/**
 * A duration: whole numbers each followed by a unit, the units w (weeks), d, h, m, s in that order
 * and each at most once: `30s`, `15m`, `12h`, `7d`, `2w`, `1h30m`, `1w2d`. At most six digits per
 * unit. Nothing else: no fractions, signs, spaces between parts, upper-case units or bare numbers
 * (a bare number would leave its unit to guesswork), except a lone `0` where zero is allowed.
 */
const DURATION = /^(?:(\d{1,6})w)?(?:(\d{1,6})d)?(?:(\d{1,6})h)?(?:(\d{1,6})m)?(?:(\d{1,6})s)?$/;
const UNITS = [WEEK, DAY, HOUR, MINUTE, SECOND] as const;

/** The grammar in one line, for help texts and messages. */
export const DURATION_GRAMMAR =
  'a duration: whole numbers with units w, d, h, m, s, largest first, each once (30s, 15m, 12h, 7d, 2w, 1h30m)';

/** A timestamp option's forms, for help texts and messages. */
export const TIMESTAMP_GRAMMAR = 'a date (2027-01-01 = that day 00:00 UTC) or an RFC 3339 time (2027-01-01T09:30:00Z, 2027-01-01T10:30:00+01:00)';

/** The bounds of one duration option, in milliseconds. */
export interface DurationRule {
  /** Zero is a meaningful value (`--grace 0`: no grace). Otherwise a duration must be more than zero. */
  readonly zero?: boolean;
  /** Longest allowed, and how the message writes it (`7d`). */
  readonly max?: { readonly ms: number; readonly text: string };
  /** Shortest allowed above zero, and how the message writes it (`1h`). */
  readonly min?: { readonly ms: number; readonly text: string };
}

/** Parses a duration per the grammar and the rule's bounds -> milliseconds; throws InvalidArgumentError. */
export function parseDuration(text: string, rule: DurationRule = {}): number {
  const value = text.trim();
  const match = value === '0' && rule.zero === true ? ['0'] : DURATION.exec(value);
  if (match === null || value === '') {
    throw new InvalidArgumentError(`Use ${rule.zero === true ? '0 or ' : ''}${DURATION_GRAMMAR}.`);
  }
  const ms = match.slice(1).reduce((sum, part, i) => sum + (part === undefined ? 0 : Number(part) * (UNITS[i] as number)), 0);
  if (ms === 0 && rule.zero !== true) throw new InvalidArgumentError('It must be more than zero, e.g. 90d, 12h, 1h30m.');
  if (ms > 0 && rule.min !== undefined && ms < rule.min.ms) throw new InvalidArgumentError(`It must be at least ${rule.min.text}.`);
  if (rule.max !== undefined && ms > rule.max.ms) throw new InvalidArgumentError(`It must be at most ${rule.max.text}.`);
  return ms;
}

/** A commander argParser for a duration option: the value in milliseconds. */
export const durationMs =
  (rule: DurationRule = {}) =>
  (text: string): number =>
    parseDuration(text, rule);

/** A commander argParser for a duration option: the value in whole seconds (the grammar's smallest unit). */
export const durationSeconds =
  (rule: DurationRule = {}) =>
  (text: string): number =>
    parseDuration(text, rule) / SECOND;

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** True when year-month-day is a day of the calendar (no 2027-02-30). */
function isCalendarDay(year: number, month: number, day: number): boolean {
  const d = new Date(Date.UTC(year, month - 1, day));
  return d.getUTCFullYear() === year && d.getUTCMonth() === month - 1 && d.getUTCDate() === day;
}

/**
 * A timestamp: a date `YYYY-MM-DD` (that day at 00:00 UTC) or a full RFC 3339 time with its offset
 * (`Z` or `±hh:mm`). Nothing else: no `tomorrow`, no time without an offset (whose zone would be this
 * machine's guess). Throws InvalidArgumentError.
 */
export function parseTimestamp(text: string): Date {
  const value = text.trim();
  const date = DATE.exec(value);
  const full = date === null ? RFC3339.exec(value) : null;
  const parts = date ?? full;
  if (parts === null) throw new InvalidArgumentError(`Use ${TIMESTAMP_GRAMMAR}.`);
  const [year, month, day] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  const at = new Date(date !== null ? Date.UTC(year, month - 1, day) : value);
  const inRange = full === null || (Number(full[4]) <= 23 && Number(full[5]) <= 59 && Number(full[6]) <= 59);
  if (!isCalendarDay(year, month, day) || !inRange || Number.isNaN(at.getTime())) {
    throw new InvalidArgumentError(`No such day or time; use ${TIMESTAMP_GRAMMAR}.`);
  }
  return at;
}

/** A commander argParser for a timestamp option. */
export const timestamp = (text: string): Date => parseTimestamp(text);

/** Largest page the contract allows (C-5). */
const MAX_PAGE_SIZE = 100;

/** `--limit`: a whole number from 1 to 100, kept as text for the core's page query. */
export function pageSize(text: string): string {
  const value = text.trim();
  if (!/^\d{1,3}$/.test(value) || Number(value) < 1 || Number(value) > MAX_PAGE_SIZE) {
    throw new InvalidArgumentError(`Use a whole number from 1 to ${MAX_PAGE_SIZE}.`);
  }
  return String(Number(value));
}

/** `--section`: a NACE Rev. 2 section letter A to U (any case) or `none`, as the core takes it. */
export function naceSection(text: string): string {
  const value = text.trim().toUpperCase();
  if (value !== 'NONE' && !Object.hasOwn(NACE_SECTIONS, value)) {
    throw new InvalidArgumentError('Use a NACE Rev. 2 section letter A to U, or none.');
  }
  return value === 'NONE' ? 'none' : value;
}

/**
 * A parser of a limit per minute: a whole number from 1 to RATE_LIMIT_MAX, or the word `none` for
 * null (no limit of its own). Wrapped, as commander takes a parser's null for "no value".
 */
export function limitPerMinute(none: string): (text: string) => { readonly perMinute: number | null } {
  return (text) => {
    const value = text.trim();
    if (value === none) return { perMinute: null };
    if (!/^\d{1,7}$/.test(value) || Number(value) < 1 || Number(value) > RATE_LIMIT_MAX) {
      throw new InvalidArgumentError(`Use a whole number from 1 to ${RATE_LIMIT_MAX}, or ${none}.`);
    }
    return { perMinute: Number(value) };
  };
}

/** `--per-minute`: an organisation's own rate limit, or `default` (its own limit removed, RATE_LIMIT_PER_MINUTE applies). */
export const perMinute = limitPerMinute('default');

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * An id, as an argument (`<org_id>`, `<key_id>`, `<member_id>`, `<id>`: every argument of every
 * command) or an option (`--org`, `--created-by`): a UUID, in lower case.
 */
export function uuid(text: string): string {
  const value = text.trim();
  if (!UUID.test(value)) throw new InvalidArgumentError('Use an id (UUID).');
  return value.toLowerCase();
}

/** A comma-separated list option whose entries must each be one of `allowed` (`--environments live,test`). */
export const listOf =
  (allowed: readonly string[]) =>
  (text: string): string[] => {
    const items = text
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    const unknown = items.filter((s) => !allowed.includes(s));
    if (items.length === 0 || unknown.length > 0) {
      throw new InvalidArgumentError(`Use a comma-separated list of ${allowed.join(', ')}${unknown.length > 0 ? ` (not ${unknown.join(', ')})` : ''}.`);
    }
    return items;
  };
