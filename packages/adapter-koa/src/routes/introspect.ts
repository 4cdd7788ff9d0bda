/**
 * POST /v1/introspect (RFC 7662 shape): another service of the platform asks about a key its client
 * presented. The caller is admitted like any key, but its request counts against its organisation's
 * introspection ceiling instead of the organisation's own limit (the route's `counts`); the core
 * authorises it (a system organisation's key holding `keys:introspect`: 403 otherwise) before the
 * body is read.
 *
 * The body is JSON (`{"token": …, "count": …, "source_address": …}`) or, as RFC 7662 §2.1 has it,
 * form-encoded (`token=…&count=true`). Form values are text: `count` is `true` or `false`, every
 * field at most once, names at most 100 characters (400 otherwise). Any other media type, and a
 * compressed body, is 400 naming the header (RFC 7662's `invalid_request`; the v1 routes answer 415). An
 * introspection is a read: it takes no Idempotency-Key, and its answer is never cached (no-store).
 */
import type { IncomingMessage } from 'node:http';
import type Koa from 'koa';
import { authorise, introspectionJson, tokenToLookAhead, ValidationError } from '@cos/core';
import { HttpError } from '../errors.js';
import { bodyInBuffer, bytesOfType, isJsonMediaType, MALFORMED_JSON, parseJson, NOT_AN_OBJECT, utf8MediaType } from '../body.js';
import type { RouteKit } from './kit.js';
import { keyRoute, type Route, type TokenAhead } from './route.js';
import type { CosRequestState } from '../state.js';

const INTROSPECT_PATH = '/v1/introspect';
const FORM_MEDIA_TYPE = 'application/x-www-form-urlencoded';
const ISSUE_REPEATED_FIELD = 'must be given once';
/** Longest form field name: a longer one (JSON sent as a form, say) is no field of this body, and is not echoed back. */
const MAX_FORM_NAME_LENGTH = 100;
const ISSUE_FORM_NAME = `form field names are at most ${MAX_FORM_NAME_LENGTH} characters`;
const ISSUE_CONTENT_TYPE = 'must be application/json or application/x-www-form-urlencoded, charset absent or utf-8';
const ISSUE_CONTENT_ENCODING = 'must be absent or identity: the body is not compressed';

/** Longest body read before admission (C-274): a token's body is far shorter; a longer one waits. */
const LOOK_AHEAD_MAX_BYTES = 1024;
const NO_STORE = 'no-store';
const ignore = (): void => {};

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** bytesOfType's verdict on the Content-Type, decided here (a media type parsed once). */
const accepted = (): boolean => true;
const refused = (): boolean => false;

/**
 * A form-encoded body as the object the JSON body would be: each field once, `count`'s `true` and
 * `false` as booleans (any other text stays text, which the core refuses). Bytes that are not UTF-8
 * are 400 like malformed JSON.
 */
function parseForm(raw: Uint8Array): Record<string, unknown> {
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw new ValidationError([{ field: 'body', issue: MALFORMED_JSON }]);
  }
  const fields: Record<string, unknown> = {};
  for (const [name, value] of new URLSearchParams(text)) {
    if (name.length > MAX_FORM_NAME_LENGTH) throw new ValidationError([{ field: 'body', issue: ISSUE_FORM_NAME }]);
    if (Object.hasOwn(fields, name)) throw new ValidationError([{ field: name, issue: ISSUE_REPEATED_FIELD }]);
    fields[name] = name === 'count' && (value === 'true' || value === 'false') ? value === 'true' : value;
  }
  return fields;
}

/**
 * The body as an object: at once when it has already arrived whole (the usual case: a small body
 * comes with its headers), else once it has. The refusals that need no bytes are thrown at once.
 */
function readIntrospectionBody(req: IncomingMessage, limitBytes: number): Record<string, unknown> | Promise<Record<string, unknown>> {
  // The Content-Type parsed once: JSON or form, charset absent or UTF-8 (415 otherwise).
  const contentType = req.headers['content-type'];
  const type = contentType === undefined ? null : utf8MediaType(contentType);
  const form = type === FORM_MEDIA_TYPE;
  let raw: Buffer | Promise<Buffer>;
  try {
    raw = bytesOfType(req, limitBytes, form || (type !== null && isJsonMediaType(type)) ? accepted : refused);
  } catch (e) {
    throw e instanceof HttpError && e.code === 'UNSUPPORTED_MEDIA_TYPE' ? mediaTypeRefusal(req) : e;
  }
  return raw instanceof Promise ? raw.then((bytes) => parseIntrospectionBody(bytes, form)) : parseIntrospectionBody(raw, form);
}

const TOKEN_OPEN = Buffer.from('{"token":"', 'latin1');
const CLOSE = Buffer.from('"}', 'latin1');
const COUNT_TRUE_CLOSE = Buffer.from('","count":true}', 'latin1');
const COUNT_FALSE_CLOSE = Buffer.from('","count":false}', 'latin1');

/** Whether `raw` from `at` to its end is exactly the bytes of `tail`. */
function endsWithAt(raw: Buffer, at: number, tail: Buffer): boolean {
  if (raw.length - at !== tail.length) return false;
  for (let i = 0; i < tail.length; i++) if (raw[at + i] !== tail[i]) return false;
  return true;
}

/**
 * The body a gateway sends on every call, byte for byte as JSON.stringify writes it:
 * `{"token":"…"}`, or with `,"count":true` or `,"count":false` after the token, the token of
 * printable ASCII other than `"` and `\`. JSON.parse would give exactly this object for those bytes
 * (no escape, no byte outside ASCII, nothing to make well-formed), so it is built from the bytes
 * themselves: only the token becomes a string. Null for any other body (spaces, escapes, other
 * fields or bytes), which is parsed as JSON.
 */
export function commonJsonBody(raw: Buffer): Record<string, unknown> | null {
  const length = raw.length;
  const open = TOKEN_OPEN.length;
  if (length <= open) return null;
  for (let i = 0; i < open; i++) if (raw[i] !== TOKEN_OPEN[i]) return null;
  let end = open;
  for (; end < length; end++) {
    const c = raw[end]!;
    if (c === 0x22) break;
    if (c < 0x20 || c > 0x7e || c === 0x5c) return null;
  }
  if (end === open || end === length) return null;
  // Every byte of the token is printable ASCII: Latin-1 reads each as the character it is.
  const token = raw.toString('latin1', open, end);
  if (endsWithAt(raw, end, CLOSE)) return { token };
  if (endsWithAt(raw, end, COUNT_FALSE_CLOSE)) return { token, count: false };
  if (endsWithAt(raw, end, COUNT_TRUE_CLOSE)) return { token, count: true };
  return null;
}

/**
 * A body of a media type this endpoint does not take, or compressed: 400 naming the header, as RFC
 * 7662 answers a request it cannot read (`invalid_request`), where the rest of the API answers 415.
 */
function mediaTypeRefusal(req: IncomingMessage): ValidationError {
  const encoding = req.headers['content-encoding']?.trim().toLowerCase();
  if (encoding !== undefined && encoding !== '' && encoding !== 'identity') return new ValidationError([{ field: 'Content-Encoding', issue: ISSUE_CONTENT_ENCODING }]);
  return new ValidationError([{ field: 'Content-Type', issue: ISSUE_CONTENT_TYPE }]);
}

function parseIntrospectionBody(raw: Buffer, form: boolean): Record<string, unknown> {
  if (form) return parseForm(raw);
  const common = commonJsonBody(raw);
  if (common !== null) return common;
  const parsed = parseJson(raw);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new ValidationError([{ field: 'body', issue: NOT_AN_OBJECT }]);
  return parsed as Record<string, unknown>;
}

/**
 * The body's token to look up alongside the caller's admission (C-274), when the whole body, at
 * most LOOK_AHEAD_MAX_BYTES, came with the headers. The body is then read here, once, exactly as the
 * route would read it, and what that gave (its value or its error) is kept for the route, which
 * answers it only after admission and authorisation, in the usual order.
 */
function tokenAhead(bodyLimitBytes: number): TokenAhead {
  return (ctx, state) => {
    const req = ctx.req;
    if (req.readableLength > LOOK_AHEAD_MAX_BYTES || !bodyInBuffer(req)) return null;
    let body: Record<string, unknown> | Promise<Record<string, unknown>>;
    try {
      body = readIntrospectionBody(req, bodyLimitBytes);
    } catch (thrown) {
      state.introspectionBody = { thrown };
      return null;
    }
    state.introspectionBody = { value: body };
    if (body instanceof Promise) {
      body.catch(ignore); // the route awaits it, if the caller is admitted
      return null;
    }
    return tokenToLookAhead(body);
  };
}

/** The body as tokenAhead read it, else read now. */
function introspectionBodyOf(ctx: Koa.Context, state: CosRequestState, bodyLimitBytes: number): Record<string, unknown> | Promise<Record<string, unknown>> {
  const early = state.introspectionBody;
  if (early === undefined) return readIntrospectionBody(ctx.req, bodyLimitBytes);
  if ('thrown' in early) throw early.thrown;
  return early.value as Record<string, unknown> | Promise<Record<string, unknown>>;
}

export function introspectRoutes(kit: RouteKit): Route[] {
  const { core, bodyLimitBytes } = kit;
  return [
    keyRoute(
      'POST',
      INTROSPECT_PATH,
      async (ctx: Koa.Context, _params, principal, state) => {
        authorise(principal, 'keys.introspect');
        const read = introspectionBodyOf(ctx, state, bodyLimitBytes);
        const answer = await core.introspection.introspect(principal, read instanceof Promise ? await read : read, state.lookAhead);
        ctx.res.setHeader('Cache-Control', NO_STORE);
        kit.jsonText(ctx, 200, introspectionJson(answer));
      },
      'introspection',
      tokenAhead(bodyLimitBytes),
    ),
  ];
}
