/**
 * A real HTTP client for a real server: fetch by default, node:http when the request is one fetch
 * would normalise away (a raw path with dot segments, a body on GET/HEAD, a method fetch forbids).
 */
import { request as httpRequest, Agent } from 'node:http';
import type { ObservedResponse } from './shapes.js';

export interface Outgoing {
  readonly method: string;
  /** Path plus optional query string, sent as is. */
  readonly path: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Buffer;
  readonly timeoutMs?: number;
  /** Force node:http (raw path, body on GET, exotic method). */
  readonly raw?: boolean;
}

export interface Incoming extends ObservedResponse {
  readonly elapsedMs: number;
  json<T = unknown>(): T;
}

const FETCH_FORBIDDEN_METHODS = new Set(['CONNECT', 'TRACE', 'TRACK']);
const rawAgent = new Agent({ keepAlive: true, maxSockets: 64 });

function needsRaw(o: Outgoing): boolean {
  if (o.raw === true) return true;
  if (FETCH_FORBIDDEN_METHODS.has(o.method.toUpperCase())) return true;
  if (o.body !== undefined && (o.method.toUpperCase() === 'GET' || o.method.toUpperCase() === 'HEAD')) return true;
  // fetch resolves "." and ".." segments and rewrites backslashes; send those bytes as they are.
  return /(^|\/)\.\.?(\/|$|\?)|\\/.test(o.path.split('?')[0] ?? '');
}

function finish(o: Outgoing, started: number, status: number, headers: Headers, text: string): Incoming {
  return {
    method: o.method,
    path: o.path,
    status,
    headers,
    text,
    elapsedMs: performance.now() - started,
    json<T>(): T {
      return JSON.parse(text) as T;
    },
  };
}

export async function send(baseUrl: string, o: Outgoing): Promise<Incoming> {
  const started = performance.now();
  const timeoutMs = o.timeoutMs ?? 15_000;
  if (!needsRaw(o)) {
    const res = await fetch(baseUrl + o.path, {
      method: o.method,
      headers: o.headers,
      body: o.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    return finish(o, started, res.status, res.headers, text);
  }
  const url = new URL(baseUrl);
  return new Promise<Incoming>((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method: o.method,
        path: o.path,
        headers: { ...o.headers, ...(o.body !== undefined ? { 'content-length': String(Buffer.byteLength(o.body)) } : {}) },
        agent: rawAgent,
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            if (v === undefined) continue;
            for (const one of Array.isArray(v) ? v : [v]) headers.append(k, one);
          }
          resolve(finish(o, started, res.statusCode ?? 0, headers, Buffer.concat(chunks).toString('utf8')));
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms: ${o.method} ${o.path}`)));
    req.on('error', reject);
    req.end(o.body);
  });
}

/** A client bound to one base URL, with JSON helpers. */
export class Client {
  constructor(readonly baseUrl: string) {}

  send(o: Outgoing): Promise<Incoming> {
    return send(this.baseUrl, o);
  }

  /** JSON request with an optional Bearer key. */
  call(method: string, path: string, options: { key?: string; body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<Incoming> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    }
    return this.send({ method, path, headers, ...(body !== undefined ? { body } : {}), ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}) });
  }
}
