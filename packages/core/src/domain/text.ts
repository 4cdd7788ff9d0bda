/**
 * Text as it can be stored and hashed (C-121, C-122). A JavaScript string may hold a lone surrogate
 * (`\ud800` in JSON), which UTF-8 cannot encode: the database drivers and the SHA-256 of the audit
 * chain write U+FFFD in its place, while JSON.stringify keeps the escape, so an audit entry hashed
 * over the escape no longer matches what was stored. U+0000 is text Postgres refuses altogether.
 */

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
const ANY_SURROGATE = /[\ud800-\udfff]/;

/**
 * `text` with every lone surrogate replaced by U+FFFD, as String.prototype.toWellFormed does (the
 * same length; well-formed text is returned as is, after one scan).
 */
export function wellFormedText(text: string): string {
  return ANY_SURROGATE.test(text) ? text.replace(LONE_SURROGATE, '\ufffd') : text;
}

/**
 * Makes every string in `value` (its members and elements, at any depth; keys are left alone)
 * well-formed, in place, without recursion; returns `value`, or the well-formed string itself.
 */
export function wellFormedStrings<T>(value: T): T {
  if (typeof value === 'string') return wellFormedText(value) as T;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const node = pending.pop();
    if (node === null || typeof node !== 'object') continue;
    const record = node as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      const v = record[key];
      if (typeof v === 'string') {
        if (ANY_SURROGATE.test(v)) record[key] = wellFormedText(v);
      } else if (v !== null && typeof v === 'object') pending.push(v);
    }
  }
  return value;
}

/**
 * `text` made storable everywhere: well-formed, and U+0000 replaced by U+FFFD too. For fields taken
 * as they come (a scanner's alert), where refusing the field would refuse what it came with.
 */
export function storableText(text: string): string {
  const wellFormed = wellFormedText(text);
  return wellFormed.includes('\u0000') ? wellFormed.replaceAll('\u0000', '\ufffd') : wellFormed;
}
