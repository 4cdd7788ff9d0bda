/**
 * Request bodies carry well-formed text only (C-121): a lone surrogate, which JSON can hold only as
 * a `\ud800`-style escape (valid UTF-8 bytes cannot encode one, and the body's bytes must be valid
 * UTF-8), is replaced by U+FFFD in every string of the parsed body, as the database drivers would
 * write it, so what a route validates, answers, stores and hashes is the same text. U+0000 is left
 * to each field's own rule (names and labels refuse control characters: 400).
 */
import { wellFormedStrings } from '@cos/core';

/** An escape of a surrogate code unit in JSON text (`\uD800`..`\uDFFF`, any case). */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * `value` (parsed from `text`) with every string well-formed. Bodies without a surrogate escape, all
 * but a few, are returned as they are after one scan of the text; others are walked (core's
 * wellFormedStrings, without recursion; object keys are left as sent: a key is a field name,
 * answered as unknown when wrong).
 */
export function wellFormedBody(text: string, value: unknown): unknown {
  return SURROGATE_ESCAPE.test(text) ? wellFormedStrings(value) : value;
}
