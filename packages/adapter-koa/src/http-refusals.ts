/**
 * What the service answers to a request refused at the HTTP layer, whatever its route: the answers
 * to what Node's parser refuses (clientErrorAnswer, written by client-error.ts's responder), and the
 * pipeline's own check of the same kind (refusedRequestAnswer). All are VALIDATION_ERROR in the
 * standard error shape; the status is this file's (400, 408, 417, 431), and the connection closes.
 *
 * A parse error can arrive while a request of the same connection is being handled: a DELETE sent
 * with `Transfer-Encoding: identity`, or with a bad chunk, is handed to the app before the parser
 * fails on what follows its headers. Answering that error on the socket at once would tell the
 * client "400" while its handler goes on and revokes the key. So when a request is in flight, the
 * client-error.ts's responder writes nothing itself: it hands the error to that request (parserErrorOf /
^ * onParserError, which the body reader and the pipeline's body wait listen to, so the route is
 * answered with the same 400 before it acts), and closes the connection once that request's answer
 * has gone out. One answer per request, and it is the one the stored state agrees with.
 *
 * refusedRequestAnswer is the pipeline's check of the same kind, for requests Node does hand over
 * but the service refuses before any route runs: a `Transfer-Encoding` other than
 * `chunked` (Node's parser fails on it right after the headers), an HTTP/1.1 request without `Host`
 * (the listener turns Node's bare 400 off), an `Expect` other than `100-continue` (the listener
 * routes Node's `checkExpectation` to the app instead of Node's bare 417).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorDetail } from '@cos/core';

/** What a parser-level failure is answered with. */
export interface ClientErrorAnswer {
  readonly status: number;
  readonly message: string;
  readonly details: ErrorDetail[];
}

/** The answer to a parser-level failure, by Node's error code. */
export function clientErrorAnswer(code: string | undefined): ClientErrorAnswer {
  if (code === 'HPE_HEADER_OVERFLOW') {
    return { status: 431, message: 'Request header section is larger than the server accepts', details: [{ field: 'headers', issue: 'too large' }] };
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return { status: 408, message: 'The request did not arrive in time', details: [] };
  }
  return { status: 400, message: 'Malformed HTTP request', details: [{ field: 'request', issue: 'malformed HTTP request' }] };
}

/** The answer to a CONNECT request: the service is no proxy and has no such method. */
export const CONNECT_ANSWER: ClientErrorAnswer = Object.freeze({
  status: 400,
  message: 'Method CONNECT is not supported',
  details: [{ field: 'method', issue: 'not supported' }],
});

/**
 * Requests the service refuses before any route runs, whatever the route: their framing or their
 * expectations are not ones it serves. Undefined for every other request.
 */
export function refusedRequestAnswer(req: IncomingMessage): ClientErrorAnswer | undefined {
  const te = req.headers['transfer-encoding'];
  // Only `chunked` frames a body the service reads; Node's parser refuses any other final coding.
  if (te !== undefined && te.trim().toLowerCase() !== 'chunked') return clientErrorAnswer('HPE_INVALID_TRANSFER_ENCODING');
  if (req.httpVersion === '1.1' && (req.headers.host === undefined || req.headers.host === '')) {
    return { status: 400, message: 'HTTP/1.1 requests must carry a Host header', details: [{ field: 'host', issue: 'field required' }] };
  }
  const expect = req.headers.expect;
  if (expect !== undefined && expect.trim().toLowerCase() !== '100-continue') {
    return { status: 417, message: "The only expectation the server meets is 'Expect: 100-continue'", details: [{ field: 'expect', issue: 'not supported' }] };
  }
  return undefined;
}

const PARSER_ERROR_EVENT = 'cos:parser-error';
/**
 * The response the pipeline is writing on each connection (set as each request begins). Node keeps
 * the same link as the socket's undocumented `_httpMessage`; this one is ours (the service uses no
 * private API of a dependency: scripts/check-private-api.mjs). A finished response counts as none, as Node clears its link on 'finish'.
 */
const responses = new WeakMap<object, ServerResponse>();

/** Called by the pipeline as each request begins (one WeakMap write; nothing to undo). */
export function trackResponse(res: ServerResponse): void {
  if (res.socket !== null) responses.set(res.socket, res);
}

/** The response of a request in flight on `socket` (not finished yet), or undefined. */
export function responseInFlight(socket: object): ServerResponse | undefined {
  const res = responses.get(socket);
  return res === undefined || res.writableFinished ? undefined : res;
}
const parserErrors = new WeakMap<IncomingMessage, Error & { code?: string }>();

/** The parse error that ended this request's connection while the request was in flight, if any. */
export function parserErrorOf(req: IncomingMessage): (Error & { code?: string }) | undefined {
  return parserErrors.get(req);
}

/** Hands a parse error of the connection to the request in flight on it (client-error.ts). */
export function notifyParserError(req: IncomingMessage, err: Error & { code?: string }): void {
  parserErrors.set(req, err);
  req.emit(PARSER_ERROR_EVENT, err);
}

/** Calls `listener` once if the connection's parser fails while `req` is in flight; returns the unsubscribe. */
export function onParserError(req: IncomingMessage, listener: (err: Error & { code?: string }) => void): () => void {
  req.once(PARSER_ERROR_EVENT, listener);
  return () => req.off(PARSER_ERROR_EVENT, listener);
}

