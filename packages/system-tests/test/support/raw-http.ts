/**
 * Requests no well-behaved client sends: chunked bodies written part by part, a declared length
 * never sent (node:http, one connection per request), and raw bytes on a socket of their own
 * (odd framing, no Host, CONNECT), with the server's answer parsed from the bytes it wrote.
 */
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { expect } from 'chai';

export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, unknown>;
  readonly body: string;
  readonly ms: number;
}

/** A raw request on its own connection: chunked body parts, or a declared length never sent. */
export function rawRequest(
  baseUrl: string,
  o: { method: string; path: string; headers: Record<string, string>; chunks?: Buffer[]; end?: boolean },
): Promise<RawResponse> {
  const url = new URL(baseUrl);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method: o.method, path: o.path, headers: o.headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, ms: performance.now() - started }));
    });
    req.on('error', reject);
    for (const c of o.chunks ?? []) req.write(c);
    if (o.end !== false) req.end();
  });
}

/** Writes bytes on a fresh socket and returns everything the server sends until it closes. */
export function rawSocket(baseUrl: string, bytes: string): Promise<string> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: url.hostname, port: Number(url.port) }, () => socket.write(Buffer.from(bytes, 'latin1')));
    let answer = '';
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer')));
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
  });
}

/** The responses in what rawSocket returned (several when requests were pipelined). */
export function parseRawAnswers(text: string): { status: number; headers: Record<string, string>; body: string }[] {
  const out: { status: number; headers: Record<string, string>; body: string }[] = [];
  let rest = text;
  while (rest.startsWith('HTTP/')) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) break;
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    const body = rest.slice(end + 4, end + 4 + length);
    out.push({ status: Number(statusLine?.split(' ')[1]), headers, body });
    rest = rest.slice(end + 4 + length);
  }
  return out;
}

/**
 * A request refused at the HTTP layer (by Node's parser or by the service before any route ran):
 * the standard error shape (VALIDATION_ERROR with `details`), X-Request-Id (C-15), the three
 * X-RateLimit-* headers (C-52), Connection: close, and nothing of the refused bytes echoed.
 */
export function refusedByParser(r: { status: number; headers: Record<string, unknown>; body: string }, status: number, details: unknown[], what: string): void {
  expect(r.status, what).to.equal(status);
  expect(String(r.headers['content-type']), what).to.equal('application/json; charset=utf-8');
  expect(JSON.parse(r.body), what).to.deep.equal({ error: 'VALIDATION_ERROR', message: JSON.parse(r.body).message, details });
  expect(JSON.parse(r.body).message, what).to.be.a('string').and.not.equal('');
  expect(String(r.headers['x-request-id']), what).to.match(/^[0-9a-f-]{36}$/);
  for (const h of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) expect(String(r.headers[h]), `${what}: ${h}`).to.match(/^\d+$/);
  expect(String(r.headers.connection).toLowerCase(), what).to.equal('close');
  expect(r.body, `${what}: the refused bytes are not echoed`).to.not.include('svc_live_');
}
