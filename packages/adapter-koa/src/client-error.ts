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
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ErrorDetail } from '@cos/core';
import type { HttpDeps } from './app.js';
import { JSON_CONTENT_TYPE, standardBody } from './errors.js';
import { setRateLimitHeaders } from './middleware/rate-limit-headers.js';
import { REQUEST_ID_HEADER } from './request-id.js';

export type ClientErrorResponder = (err: Error & { code?: string }, socket: Duplex) => void;

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

export function createClientErrorResponder(deps: HttpDeps): ClientErrorResponder {
  const { core, logger } = deps;
  return (err, socket) => {
    // As Node's default: answer only when nothing of a response has gone out on this connection.
    const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (socket.writable && inFlight?.headersSent !== true && err.code !== 'ECONNRESET') {
      const answer = clientErrorAnswer(err.code);
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
          { request_id: requestId, method: null, route: null, path: null, status: answer.status, latency_ms: 0, error_code: 'VALIDATION_ERROR', parser_error: err.code ?? null },
          'request refused by the HTTP parser',
        );
      }
    }
    socket.destroy();
  };
}
