/**
 * Opaque keyset cursors (C-6): base64url of the JSON pair [createdAt ISO, id], never an offset.
 * A cursor that does not decode to a valid position (an ISO timestamp and a UUID: every record id
 * is one) is ValidationError with field "cursor". Nothing else reaches a store's keyset query: a
 * cursor id holding U+0000, for one, would fail on Postgres, whose text cannot hold it.
 */
import { ValidationError } from '../domain/errors.js';
import type { KeysetPosition } from '../ports/pagination.js';

const MAX_CURSOR_LENGTH = 512;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
/** A record id as the service makes them (lower-case hex, as encodeCursor writes it). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

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
  if (typeof at !== 'string' || typeof id !== 'string' || !UUID.test(id)) throw invalid();
  const createdAt = new Date(at);
  if (Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== at) throw invalid();
  return { createdAt, id };
}

/** The cursor of an organisation's audit events (C-6): base64url of the JSON `{"seq": n}`, the last seq of the page. */
export function encodeSeqCursor(seq: number): string {
  return Buffer.from(JSON.stringify({ seq }), 'utf8').toString('base64url');
}

export function decodeSeqCursor(cursor: string): number {
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !BASE64URL.test(cursor)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || Object.keys(parsed).length !== 1) throw invalid();
  const seq = (parsed as { seq?: unknown }).seq;
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1) throw invalid();
  return seq;
}
