/**
 * Keeps raw keys and key digests out of logs (C-31, "never log a key"): anything shaped like an API
 * key or a SHA-256 hex digest in a logged path, query or error text is replaced. Only called on
 * text that is about to be logged; the cheap `includes` guard keeps the common case free.
 */
const KEY_LIKE = /svc_(?:live|test)_[A-Za-z0-9]*/gi;
const DIGEST_LIKE = /\b[0-9a-f]{64}\b/gi;
const REDACTED = '[REDACTED]';

export function redact(text: string): string {
  let out = text;
  if (/svc_/i.test(out)) out = out.replace(KEY_LIKE, REDACTED);
  if (out.length >= 64) out = out.replace(DIGEST_LIKE, REDACTED);
  return out;
}
