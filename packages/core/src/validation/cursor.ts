/**
 * Opaque keyset cursors (C-6): base64url of the JSON pair [createdAt ISO, id], never an offset.
 * A cursor that does not decode is ValidationError with field "cursor".
 */
import { ValidationError } from '../domain/errors.js';
import type { KeysetPosition } from '../ports/pagination.js';

const MAX_CURSOR_LENGTH = 512;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

export function encodeCursor(position: KeysetPosition): string {
  return Buffer.from(JSON.stringify([position.createdAt.toISOString(), position.id]), 'utf8').toString('base64url');
}

function invalid(): ValidationError {
  return new ValidationError([{ field: 'cursor', issue: 'invalid cursor' }]);
}

export function decodeCursor(cursor: string): KeysetPosition {
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !BASE64URL.test(cursor)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) throw invalid();
  const [at, id] = parsed as unknown[];
  if (typeof at !== 'string' || typeof id !== 'string' || id.length === 0 || id.length > 64) throw invalid();
  const createdAt = new Date(at);
  if (Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== at) throw invalid();
  return { createdAt, id };
}
