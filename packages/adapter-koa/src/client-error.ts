/**
 * Requests Node's HTTP parser refuses before any middleware runs: a header section over Node's
 * limit (16 KiB by default), a method, header or framing it cannot parse, a request that did not
 * arrive within the server's `requestTimeout`. Node's own answer to those is a bare status line;
 * this one is in the contract's standard error shape (`VALIDATION_ERROR`: the request itself is
 * invalid), with `X-Request-Id` (C-15) and the `X-RateLimit-*` headers of the client address's scope
 * as for any uncounted request (C-52), and the connection is closed, as Node does: after a parse
 * error the rest of the byte stream cannot be trusted.
 *
 *   server.on('clientError', createClientErrorResponder({ core, logger }));
 *
 * The refused bytes (Node hands them over as `err.rawPacket`) are never logged or echoed: they may
 * hold a key.
 *
 * The answers themselves, and how a parse error reaches a request in flight, are in http-refusals.ts.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { HttpDeps } from './app.js';
import { JSON_CONTENT_TYPE, standardBody } from './errors.js';
import { setRateLimitHeaders } from './middleware/rate-limit-headers.js';
import { REQUEST_ID_HEADER } from './request-id.js';
import { CONNECT_ANSWER, clientErrorAnswer, notifyParserError, responseInFlight, type ClientErrorAnswer } from './http-refusals.js';

export { clientErrorAnswer, refusedRequestAnswer, type ClientErrorAnswer } from './http-refusals.js';

export type ClientErrorResponder = (err: Error & { code?: string }, socket: Duplex) => void;

/** The standard-shape answer as raw bytes, for a socket no ServerResponse writes on any more. */
function writeRawAnswer(deps: HttpDeps, socket: Duplex, answer: ClientErrorAnswer, why: Record<string, unknown>, message: string): void {
  const { core, logger } = deps;
  const requestId = randomUUID();
  const address = (socket as Partial<Socket>).remoteAddress ?? 'unknown';
  const text = standardBody('VALIDATION_ERROR', answer.message, answer.details);
  let head =
    `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? 'Error'}\r\n` +
    `Content-Type: ${JSON_CONTENT_TYPE}\r\n` +
    `Content-Length: ${Buffer.byteLength(text)}\r\n` +
    `${REQUEST_ID_HEADER}: ${requestId}\r\n`;
  setRateLimitHeaders(core.rateLimiter.peek({ kind: 'source', address }), {
    setHeader: (name, value) => (head += `${name}: ${value}\r\n`),
  });
  socket.write(`${head}Connection: close\r\n\r\n${text}`);
  if (logger.isLevelEnabled?.('info') ?? true) {
    logger.info(
      { request_id: requestId, method: null, route: null, path: null, status: answer.status, latency_ms: 0, error_code: 'VALIDATION_ERROR', ...why },
      message,
    );
  }
}

/**
 * The server's `connect` event: CONNECT (a proxy tunnel request) gets a 400 in the standard error
 * shape with the C-15/C-52 headers instead of a silently closed connection.
 *
 *   server.on('connect', createConnectResponder({ core, logger }));
 */
export function createConnectResponder(deps: HttpDeps): (req: IncomingMessage, socket: Duplex) => void {
  return (_req, socket) => {
    if (socket.writable) writeRawAnswer(deps, socket, CONNECT_ANSWER, { method: 'CONNECT' }, 'request refused: CONNECT');
    socket.end();
    socket.once('finish', () => socket.destroy());
  };
}

/** Parser errors that mean the client closed its side: ECONNRESET, or EOF in the middle of a request. */
const CLIENT_GONE: ReadonlySet<string> = new Set(['ECONNRESET', 'HPE_INVALID_EOF_STATE']);

export function createClientErrorResponder(deps: HttpDeps): ClientErrorResponder {
  return (err, socket) => {
    // The client hung up (mid-body, or between requests): nobody is left to answer. A request in
    // flight sees its connection close and is logged as aborted by the pipeline.
    if (CLIENT_GONE.has(err.code ?? '')) {
      socket.destroy();
      return;
    }
    const inFlight = responseInFlight(socket);
    if (inFlight !== undefined && err.code !== 'ECONNRESET' && socket.writable) {
      // A request of this connection is being handled: its answer is the connection's last one
      // (see the file comment). Nothing more is read from this connection.
      inFlight.shouldKeepAlive = false;
      if (!inFlight.headersSent) notifyParserError(inFlight.req, err);
      inFlight.once('close', () => socket.destroy());
      return;
    }
    // As Node's default: answer only when nothing of a response has gone out on this connection.
    if (socket.writable && inFlight?.headersSent !== true && err.code !== 'ECONNRESET') {
      writeRawAnswer(deps, socket, clientErrorAnswer(err.code), { parser_error: err.code ?? null }, 'request refused by the HTTP parser');
    }
    socket.destroy();
  };
}
