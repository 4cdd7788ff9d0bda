/**
 * C-132: how deeply a JSON request body may nest. Every JSON body (the routes' bodies and the
 * secret-scanning alerts) is refused with 400 `{field: "body", issue: TOO_DEEP}` past
 * MAX_JSON_DEPTH containers, before anything walks it (validation, the Idempotency-Key
 * fingerprint): no request of the API needs more than a few levels, and a deeper one is refused
 * the same way whatever route it is sent to.
 */

/** The deepest nesting of objects and arrays a body may have; a top-level object is level 1. */
export const MAX_JSON_DEPTH = 64;
export const TOO_DEEP = `must not nest objects or arrays more than ${MAX_JSON_DEPTH} levels deep`;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/**
 * True when the JSON text `text` (already parsed successfully) nests objects and arrays more than
 * `limit` levels deep. One pass over the characters, no allocation: brackets inside strings are
 * skipped (a string ends at the first quote not escaped by a backslash), every other bracket opens
 * or closes a level.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}
