/**
 * C-10: request bodies are JSON objects of at most `limitBytes` (64 KiB by default).
 *
 * Read lazily by the routes that take a body (POST, PUT, PATCH), through the route kit, which first
 * has the core authorise the operation: authentication, the rate limit and authorisation (C-33)
 * come first, and no GET ever reads one. In order:
 *  1. a Content-Type that is not JSON (`application/json` or `application/*+json`, charset absent or
 *     utf-8) is 415; so is a non-empty body sent without any Content-Type, and a body with a
 *     Content-Encoding other than `identity` (a gzip body would otherwise read as malformed JSON);
 *  2. no body at all (and no Content-Type) is 400 `{field:"body", issue:"must be a JSON object"}`;
 *  3. a declared Content-Length over the limit is 413 before anything is read; a body that grows
 *     past the limit while streaming is 413 as well;
 *  4. bytes that are not UTF-8 JSON are 400 `{field:"body", issue:"malformed JSON"}`;
 *  5. JSON nested more than 64 levels deep is 400 (json-depth.ts, C-132);
 *  6. JSON that is not an object (array, string, number, null) is 400 "must be a JSON object".
 * A body the HTTP parser fails on (a bad chunk, a `Transfer-Encoding` it refuses) is the parser's
 * 400 (RefusedRequestError); a client that hangs up before its body is complete gets no answer
 * (ClientAbortedError: the pipeline logs it as an abort, not as a failure).
 *
 * awaitBodyEnd is the same wait for a DELETE, which takes no body but acts: a body sent anyway is
 * received and discarded before the route runs, so a framing error in it is answered before the
 * route acts, never after (a DELETE answered 400 must not revoke). Reads do not wait for a body
 * (C-141, the dispatch).
 *
 * Libraries: `content-type` parses the Content-Type header (media type, charset); `raw-body` reads
 * the bytes under the limit (413 for a declared length over it before anything is read, and for a
 * stream that grows past it). What stays here is what they do not know: the contract's rules
 * (which types are JSON, no Content-Encoding, no body vs an empty one), UTF-8 that must be valid
 * (raw-body's decoding replaces bad bytes; the built-in TextDecoder with `fatal` refuses them), and
 * an ending for a body that never completes: a parse error of the connection (http-refusals.ts's event, which no stream
 * listener sees) or a client that hung up ends the wait instead of leaving it pending.
 */
import type { IncomingMessage } from 'node:http';
import { finished } from 'node:stream/promises';
import { parse as parseContentType } from 'content-type';
import getRawBody from 'raw-body';
import { ValidationError } from '@cos/core';
import { clientErrorAnswer, onParserError, parserErrorOf } from './http-refusals.js';
import { MAX_JSON_DEPTH, nestsDeeperThan, TOO_DEEP } from './json-depth.js';
import { wellFormedBody } from './well-formed.js';
import { payloadTooLarge, RefusedRequestError, unsupportedContentEncoding, unsupportedMediaType } from './errors.js';

export const DEFAULT_BODY_LIMIT_BYTES = 64 * 1024;
export const MALFORMED_JSON = 'malformed JSON';
export const NOT_AN_OBJECT = 'must be a JSON object';

const utf8 = new TextDecoder('utf-8', { fatal: true });
const JSON_MEDIA_TYPE = /^application\/(?:[a-z0-9!#$&^_.+-]+\+)?json$/;

/** True for `application/json` and `application/<x>+json`, with no charset or charset=utf-8. */
function isJsonContentType(header: string): boolean {
  const type = utf8MediaType(header);
  return type !== null && isJsonMediaType(type);
}

/** True for the media types `application/json` and `application/<x>+json`. */
export function isJsonMediaType(type: string): boolean {
  return JSON_MEDIA_TYPE.test(type);
}

/** The header utf8MediaType read last, and its answer: a client sends the same Content-Type with every request. */
let lastHeader: string | undefined;
let lastMediaType: string | null = null;

/** `header`'s media type when its charset is absent or utf-8; null otherwise, and for a header that does not parse. */
export function utf8MediaType(header: string): string | null {
  if (header !== lastHeader) {
    lastMediaType = parseUtf8MediaType(header);
    lastHeader = header;
  }
  return lastMediaType;
}

function parseUtf8MediaType(header: string): string | null {
  let parsed: ReturnType<typeof parseContentType>;
  try {
    parsed = parseContentType(header);
  } catch {
    return null;
  }
  const charset = parsed.parameters.charset?.toLowerCase();
  return charset === undefined || charset === 'utf-8' || charset === 'utf8' ? parsed.type : null;
}

/** The client closed the connection before its request was complete: nobody is left to answer. */
export class ClientAbortedError extends Error {
  constructor() {
    super('request aborted by the client before its body was complete');
    this.name = 'ClientAbortedError';
  }
}

/** What ends the wait for a body when the stream can no longer complete. */
function endedEarly(req: IncomingMessage): Error | undefined {
  const parserError = parserErrorOf(req);
  if (parserError !== undefined) return new RefusedRequestError(clientErrorAnswer(parserError.code));
  if (req.destroyed && !req.readableEnded) return new ClientAbortedError();
  return undefined;
}

/**
 * `reading` (of `req`'s body), unless the connection's parser fails first: then the parser's 400.
 * A failure of the stream itself is the parser's error if there was one, else the client's hang-up.
 */
function untilEnd<T>(req: IncomingMessage, reading: Promise<T>, translate: (err: unknown) => Error | undefined): Promise<T> {
  let unsubscribe = (): void => undefined;
  const parserFailed = new Promise<never>((_resolve, reject) => {
    unsubscribe = onParserError(req, (err) => reject(new RefusedRequestError(clientErrorAnswer(err.code))));
  });
  const read = reading.catch((err: unknown) => {
    throw translate(err) ?? endedEarly(req) ?? new ClientAbortedError();
  });
  return Promise.race([read, parserFailed]).finally(unsubscribe);
}

/**
 * The body's bytes, at most `limitBytes` of them (raw-body: 413 past the limit). A body that cannot
 * arrive is the parser's 400 or ClientAbortedError.
 */
function receive(req: IncomingMessage, limitBytes: number): Buffer | Promise<Buffer> {
  const early = endedEarly(req);
  if (early !== undefined) return Promise.reject(early);
  // Something in front of this adapter (a host's body parser) already consumed the stream.
  if (req.readableEnded) return Promise.reject(new Error('request body was already consumed before the v1 surface read it'));
  const arrived = alreadyArrived(req, limitBytes);
  if (arrived !== null) return arrived;
  return untilEnd(req, getRawBody(req, { length: req.headers['content-length'] ?? null, limit: limitBytes }), (err) => {
    if ((err as { type?: unknown }).type !== 'entity.too.large') return undefined;
    // raw-body leaves the stream paused for its caller to handle: drop the rest, so that the
    // connection goes on to its next request (validation.test.ts; Node 20 would drain it as well).
    req.resume();
    return payloadTooLarge(limitBytes);
  });
}

/**
 * The body's bytes when all of them are already in the request stream's buffer and within the limit,
 * else null. A small request usually arrives in one read of its socket, and the route reads its body
 * after the parser has delivered all of it (bodyInBuffer), so the bytes are taken from the buffer at
 * once, without raw-body's listeners and the race against a parser error that cannot come any more.
 * Anything else (still arriving, flowing, decoded to text, or declared over the limit) goes through
 * raw-body.
 */
function alreadyArrived(req: IncomingMessage, limitBytes: number): Buffer | null {
  if (!bodyInBuffer(req) || req.readableFlowing !== null || req.readableEncoding !== null || req.readableLength > limitBytes) return null;
  const declared = req.headers['content-length'];
  if (declared !== undefined && !(Number(declared) <= limitBytes)) return null;
  // Not flowing and not decoded: the buffer holds the whole body as bytes (null for an empty one).
  const bytes = req.read() as Buffer | null;
  // The parser marks the message complete after it has handed over the last bytes: let the stream
  // flow, so that it ends (and nothing is left paused) once the parser does.
  if (!req.complete) req.resume();
  return bytes ?? Buffer.alloc(0);
}

/**
 * Whether the parser has handed over the request's whole body: it has framed the whole message
 * (`complete`), or the body is Content-Length framed and that many bytes are in the stream's buffer.
 * The second happens on a TCP socket: the parser hands over a body that came with its headers before
 * it marks the message complete, and the microtasks of the request's callback run in between. Once
 * the declared length has arrived, nothing the parser does afterwards can change these bytes.
 */
export function bodyInBuffer(req: IncomingMessage): boolean {
  if (req.complete) return true;
  const declared = req.headers['content-length'];
  return declared !== undefined && req.headers['transfer-encoding'] === undefined && req.readableLength === Number(declared) && !req.readableEnded;
}

/**
 * For a DELETE: resolves once any body sent anyway has arrived (and is dropped);
 * rejects with the parser's 400 or ClientAbortedError when it cannot arrive. A request without a
 * body resolves at once.
 */
export function awaitBodyEnd(req: IncomingMessage): Promise<void> | undefined {
  if (!hasBody(req) && parserErrorOf(req) === undefined) return undefined;
  const early = endedEarly(req);
  if (early !== undefined) return Promise.reject(early);
  if (req.readableEnded) return Promise.resolve();
  req.resume();
  return untilEnd(req, finished(req, { readable: true, writable: false }), () => undefined);
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

function invalidBody(issue: string): ValidationError {
  return new ValidationError([{ field: 'body', issue }]);
}

/**
 * The raw bytes of a JSON request body, after the checks that need no bytes (C-10): 415 for a
 * content type that is not JSON (or none with a body) and for a compressed body, 413 for a declared
 * or streamed length over `limitBytes`; an empty buffer for an empty body with a JSON type;
 * 400 "must be a JSON object" when neither a body nor a Content-Type was sent.
 */
export async function readJsonBytes(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  return bytesOfType(req, limitBytes, isJsonContentType);
}

/**
 * readJsonBytes for a route that also takes other media types (`accepts` says which, 415 otherwise),
 * on the hot path: the bytes themselves when they have all arrived (alreadyArrived), without a
 * promise, else a promise of them; the refusals that need no bytes (415, 400) are thrown at once.
 */
export function bytesOfType(req: IncomingMessage, limitBytes: number, accepts: (contentType: string) => boolean): Buffer | Promise<Buffer> {
  const contentType = req.headers['content-type'];
  const bodyPresent = hasBody(req);
  if (contentType === undefined) {
    if (bodyPresent) throw unsupportedMediaType();
    throw invalidBody(NOT_AN_OBJECT);
  }
  if (!accepts(contentType)) throw unsupportedMediaType();
  const encoding = req.headers['content-encoding']?.trim().toLowerCase();
  if (encoding !== undefined && encoding !== '' && encoding !== 'identity') throw unsupportedContentEncoding();

  return bodyPresent ? receive(req, limitBytes) : Buffer.alloc(0);
}

/**
 * UTF-8 JSON of any shape from the bytes of a body, its strings well-formed (C-121); 400 "malformed
 * JSON" otherwise, and 400 TOO_DEEP for JSON nested more than MAX_JSON_DEPTH levels (C-132), checked
 * before anything walks the value.
 */
export function parseJson(raw: Uint8Array): unknown {
  let text: string;
  let parsed: unknown;
  try {
    text = utf8.decode(raw);
    parsed = JSON.parse(text);
  } catch {
    throw invalidBody(MALFORMED_JSON);
  }
  // Valid JSON nested deeper than the limit opens and closes more brackets than a shorter text has.
  if (text.length > 2 * MAX_JSON_DEPTH && nestsDeeperThan(text, MAX_JSON_DEPTH)) throw invalidBody(TOO_DEEP);
  return wellFormedBody(text, parsed);
}

/**
 * readJsonBody for a route whose body is optional (the roll of a key): a request with neither a body
 * nor a Content-Type is the empty object; anything else is read and checked like any body (C-10).
 */
export async function readOptionalJsonBody(req: IncomingMessage, limitBytes: number): Promise<Record<string, unknown>> {
  if (req.headers['content-type'] === undefined && !hasBody(req)) return {};
  return readJsonBody(req, limitBytes);
}

/** Reads, checks and parses the JSON object body of a request (C-10). */
export async function readJsonBody(req: IncomingMessage, limitBytes: number): Promise<Record<string, unknown>> {
  const parsed = parseJson(await readJsonBytes(req, limitBytes));
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw invalidBody(NOT_AN_OBJECT);
  return parsed as Record<string, unknown>;
}
