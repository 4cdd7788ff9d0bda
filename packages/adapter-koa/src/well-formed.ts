/**
 * Request bodies carry well-formed text only (C-121): a lone surrogate, which JSON can hold only as
 * a `\ud800`-style escape (valid UTF-8 bytes cannot encode one, and the body's bytes must be valid
 * UTF-8), is replaced by U+FFFD in every string of the parsed body, as the database drivers would
 * write it, so what a route validates, answers, stores and hashes is the same text. U+0000 is left
 * to each field's own rule (names and labels refuse control characters: 400).
 */
import { wellFormedText } from '@cos/core';

/** An escape of a surrogate code unit in JSON text (`\uD800`..`\uDFFF`, any case). */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * `value` (parsed from `text`) with every string well-formed. Bodies without a surrogate escape, all
 * but a few, are returned as they are after one scan of the text; others are walked without
 * recursion (object keys are left as sent: a key is a field name, answered as unknown when wrong).
 */
export function wellFormedBody(text: string, value: unknown): unknown {
  if (!SURROGATE_ESCAPE.test(text)) return value;
  if (typeof value === 'string') return wellFormedText(value);
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const node = pending.pop();
    if (node === null || typeof node !== 'object') continue;
    const record = node as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      const v = record[key];
      if (typeof v === 'string') record[key] = wellFormedText(v);
      else if (v !== null && typeof v === 'object') pending.push(v);
    }
  }
  return value;
}
