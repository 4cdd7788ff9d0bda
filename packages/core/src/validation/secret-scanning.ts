/**
 * A secret-scanning alert body: a JSON array of 1..1000 matches `{token, type, url?, source?}`.
 * Fields the programme may add later are ignored (the alert is the scanner's format, not ours);
 * everything else that does not fit is 400 with one detail per failing field, e.g. `[3].token`.
 * Lone surrogates and U+0000 in `type`, `url` and `source` are replaced by U+FFFD (C-122).
 */
import { z } from 'zod';
import type { ErrorDetail } from '../domain/errors.js';
import { invalid, valid, ISSUE_FIELD_REQUIRED, type Checked } from './issues.js';
import { storableText } from '../domain/text.js';

export const MAX_ALERT_MATCHES = 1000;
export const ISSUE_ALERT_BODY = `must be a JSON array of 1 to ${MAX_ALERT_MATCHES} matches`;
export const ISSUE_ALERT_MATCH = 'must be an object with token and type';
export const ISSUE_TOKEN = 'must be a string of 1 to 1024 characters';
export const ISSUE_TOKEN_TYPE = 'must be a string of 1 to 200 characters';
export const ISSUE_ALERT_URL = 'must be a string of at most 2048 characters';
export const ISSUE_ALERT_SOURCE = 'must be a string of at most 200 characters';

export interface AlertMatch {
  readonly token: string;
  readonly type: string;
  readonly url: string | null;
  readonly source: string | null;
}

const text = (max: number, error: string, min = 1) => z.string({ error }).min(min, { error }).max(max, { error });

const matchSchema = z.looseObject({
  token: text(1024, ISSUE_TOKEN),
  type: text(200, ISSUE_TOKEN_TYPE),
  url: text(2048, ISSUE_ALERT_URL, 0).nullable().optional(),
  source: text(200, ISSUE_ALERT_SOURCE, 0).nullable().optional(),
});

/** A field of the scanner's text as it is stored, hashed into the audit chain and sent in events (C-121, C-122). */
const stored = (value: string | null | undefined): string | null => (value === null || value === undefined ? null : storableText(value));

export function checkAlert(body: unknown): Checked<AlertMatch[]> {
  if (!Array.isArray(body) || body.length === 0 || body.length > MAX_ALERT_MATCHES) {
    return invalid([{ field: 'body', issue: ISSUE_ALERT_BODY }]);
  }
  const details: ErrorDetail[] = [];
  const matches: AlertMatch[] = [];
  body.forEach((item: unknown, i) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) {
      details.push({ field: `[${i}]`, issue: ISSUE_ALERT_MATCH });
      return;
    }
    const result = matchSchema.safeParse(item);
    if (!result.success) {
      const seen = new Set<string>();
      for (const issue of result.error.issues) {
        const field = String(issue.path[0] ?? '');
        if (seen.has(field)) continue;
        seen.add(field);
        const missing = !Object.hasOwn(item, field) || (item as Record<string, unknown>)[field] === undefined;
        details.push({ field: `[${i}].${field}`, issue: missing ? ISSUE_FIELD_REQUIRED : issue.message });
      }
      return;
    }
    const m = result.data;
    // The token is compared, never stored. The other fields are the scanner's text, taken as they
    // come: a lone surrogate or U+0000 in them is replaced by U+FFFD, never a reason to refuse the
    // alert (which would leave every key in it valid) nor text that the store or the hash read
    // differently (C-121, C-122).
    matches.push({ token: m.token, type: storableText(m.type), url: stored(m.url), source: stored(m.source) });
  });
  return details.length > 0 ? invalid(details) : valid(matches);
}
