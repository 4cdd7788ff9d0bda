/**
 * Real HTTP for the tests: a node:http server on an ephemeral port and a fetch-based client whose
 * every response is validated against docs/openapi.yaml before the test sees it.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OpenApiDocument } from './openapi.js';

export interface Listening {
  readonly baseUrl: string;
  readonly server: Server;
  close(): Promise<void>;
}

export async function listen(handler: RequestListener): Promise<Listening> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

export interface ApiResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** Parsed JSON body, or undefined when the body is empty. */
  readonly body: any;
}

export interface RequestOptions {
  /** Sent as `Authorization: Bearer <key>`. */
  key?: string;
  /** Sent verbatim as `Authorization`. */
  authorization?: string;
  /** Serialised as JSON with `Content-Type: application/json`. */
  json?: unknown;
  /** Sent as is (no Content-Type is added for a Uint8Array). */
  body?: string | Uint8Array;
  headers?: Record<string, string>;
}

export class Api {
  /** Every exchange made through this client, newest last. */
  readonly exchanges: { method: string; path: string; status: number }[] = [];

  constructor(
    readonly baseUrl: string,
    /** Path of the host's mount point in front of `/v1` (empty for createKoaApp). */
    readonly mountPrefix = '',
    readonly doc: OpenApiDocument = OpenApiDocument.load(),
  ) {}

  async request(method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.key !== undefined) headers['authorization'] = `Bearer ${options.key}`;
    if (options.authorization !== undefined) headers['authorization'] = options.authorization;
    let body: string | Uint8Array | undefined = options.body;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(`${this.baseUrl}${this.mountPrefix}${path}`, { method, headers, body });
    const text = await res.text();
    const pathOnly = path.split('?')[0]!;
    this.exchanges.push({ method, path: pathOnly, status: res.status });
    this.doc.validate({
      method,
      path: relativeToServer(pathOnly, this.doc.serverUrl),
      status: res.status,
      headers: res.headers,
      text,
    });
    return { status: res.status, headers: res.headers, text, body: text.length > 0 ? JSON.parse(text) : undefined };
  }

  get(path: string, options?: RequestOptions): Promise<ApiResponse> {
    return this.request('GET', path, options);
  }
  post(path: string, options?: RequestOptions): Promise<ApiResponse> {
    return this.request('POST', path, options);
  }
  put(path: string, options?: RequestOptions): Promise<ApiResponse> {
    return this.request('PUT', path, options);
  }
  patch(path: string, options?: RequestOptions): Promise<ApiResponse> {
    return this.request('PATCH', path, options);
  }
  delete(path: string, options?: RequestOptions): Promise<ApiResponse> {
    return this.request('DELETE', path, options);
  }
}

/** `/v1/organisations` -> `/organisations`; paths outside the server url stay as they are (they are 404s). */
function relativeToServer(path: string, serverUrl: string): string {
  if (path === serverUrl) return '/';
  return path.startsWith(`${serverUrl}/`) ? path.slice(serverUrl.length) : `/..${path}`;
}

export interface RawResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
}

/**
 * A request through node:http for the cases fetch refuses or normalises (header values with
 * leading/trailing blanks or non-ASCII bytes). Its response is validated like the others.
 */
export function rawRequest(
  api: Api,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer,
): Promise<RawResponse> {
  const url = new URL(`${api.baseUrl}${api.mountPrefix}${path}`);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { method, host: url.hostname, port: url.port, path: url.pathname + url.search, headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
          try {
            api.doc.validate({ method, path: relativeToServer(url.pathname, api.doc.serverUrl), status: res.statusCode!, headers: h, text });
          } catch (err) {
            reject(err);
            return;
          }
          resolve({ status: res.statusCode!, headers: res.headers, text });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
