/**
 * @cos/webhook-sender: the WebhookSender port over HTTP, signed by the Standard Webhooks scheme
 * (the `standardwebhooks` library): headers `webhook-id`, `webhook-timestamp` (epoch seconds) and
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, body the notification's JSON.
 *
 * One attempt is bounded by its `timeoutMs` (connection, request and answer) and its `signal`. Only
 * a 2xx answer is a delivery; redirects are not followed (a 3xx is a failure: the endpoint is the
 * URL the operator set, nothing else). The answer's status is all that is used: the connection is
 * closed as soon as the status line and headers have arrived, so a receiver's body is never read
 * (a receiver streaming an endless answer costs nothing). Failures are results, never thrown, and
 * hold no response body.
 *
 * Destinations (core's webhook-destination rules): the URL's scheme and literal host are checked
 * first; a host name is resolved once per attempt, every address it resolves to is checked, and the
 * connection goes to a checked address (node:http's `lookup` hook), so a name cannot resolve to a
 * public address for the check and to an internal one for the connection. TLS still verifies the
 * certificate against, and sends SNI for, the host name of the URL.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { request as httpRequest, type ClientRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { addressRefusal, urlRefusal, type WebhookHostResolver, type WebhookRequest, type WebhookResult, type WebhookSender } from '@cos/core';
import { Webhook } from 'standardwebhooks';

export interface WebhookSenderOptions {
  /** `User-Agent` of the requests. Default `cos-webhooks/1`. */
  readonly userAgent?: string;
  /** Plain http:// endpoints (WEBHOOK_ALLOW_HTTP). Default false: https:// only. */
  readonly allowHttp?: boolean;
  /** Loopback, private, link-local, unique-local addresses and internal names (WEBHOOK_ALLOW_PRIVATE). Default false. */
  readonly allowPrivate?: boolean;
  /** How host names are resolved. Default: the system resolver (dnsHostResolver). */
  readonly hosts?: WebhookHostResolver;
  /** Certificate authorities to trust instead of the system's (tests, a private CA). */
  readonly ca?: string | Buffer | ReadonlyArray<string | Buffer>;
}

/** Any URL quoted in an error text. */
const URL_IN_TEXT = /[a-z][a-z0-9+.-]*:\/\/\S*/gi;

/** A destination the policy refuses: the attempt fails with this reason and nothing is sent. */
class RefusedDestination extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'RefusedDestination';
  }
}

/** The reason of a failed request, short and without a URL's query or credentials. */
function describeFailure(error: unknown, timeoutMs: number, timedOut: boolean): string {
  if (error instanceof RefusedDestination) return error.reason;
  const e = error as { name?: string; code?: string; cause?: { code?: string; message?: string }; message?: string };
  if (timedOut) return `no answer within ${timeoutMs} ms`;
  if (e?.name === 'AbortError') return 'attempt aborted';
  const code = e?.code ?? e?.cause?.code;
  if (typeof code === 'string' && /^(ERR_TLS_|ERR_SSL_|CERT_|DEPTH_|SELF_SIGNED|UNABLE_TO_)/.test(code)) return `TLS failed (${code})`;
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return `connection failed (${code})`;
  const reason = String(e?.cause?.message ?? e?.message ?? String(error)).replace(URL_IN_TEXT, '<url>');
  return `request failed (${reason})`.slice(0, 200);
}

/** How long the system resolver may take before a name counts as not resolving (getaddrinfo cannot be cancelled). */
export const DNS_LOOKUP_BOUND_MS = 5_000;

export interface DnsHostResolverOptions {
  /** Default: node:dns's lookup (getaddrinfo, as connections use it), every address. */
  readonly lookup?: (hostname: string) => Promise<ReadonlyArray<{ readonly address: string }>>;
  /** Default DNS_LOOKUP_BOUND_MS. */
  readonly boundMs?: number;
}

/** A resolver giving every address of a name, [] when it has none now or none within `boundMs`; never throws. */
export function createDnsHostResolver(options: DnsHostResolverOptions = {}): WebhookHostResolver {
  const lookup = options.lookup ?? ((hostname: string) => dnsLookup(hostname, { all: true, verbatim: true }));
  const boundMs = options.boundMs ?? DNS_LOOKUP_BOUND_MS;
  return {
    async resolve(hostname: string): Promise<readonly string[]> {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<readonly string[]>((resolve) => {
        timer = setTimeout(() => resolve([]), boundMs).unref();
      });
      const answer = Promise.resolve()
        .then(() => lookup(hostname))
        .then(
          (addresses) => addresses.map((a) => a.address),
          () => [] as readonly string[],
        );
      try {
        return await Promise.race([answer, bound]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** The system resolver (getaddrinfo), bounded by DNS_LOOKUP_BOUND_MS. */
export const dnsHostResolver: WebhookHostResolver = createDnsHostResolver();

/** Signs one request's headers (exported for tests and for receivers written against this service). */
export function signedHeaders(request: Pick<WebhookRequest, 'secret' | 'previousSecret' | 'messageId' | 'timestamp' | 'body'>): Record<string, string> {
  const sign = (secret: string): string => new Webhook(secret).sign(request.messageId, request.timestamp, request.body);
  // During a rotation's overlap both signatures (Standard Webhooks: space-separated), the new one first.
  const signatures = [sign(request.secret), ...(request.previousSecret !== undefined ? [sign(request.previousSecret)] : [])];
  return {
    'webhook-id': request.messageId,
    'webhook-timestamp': String(Math.floor(request.timestamp.getTime() / 1000)),
    'webhook-signature': signatures.join(' '),
  };
}

export function createWebhookSender(options: WebhookSenderOptions = {}): WebhookSender {
  const userAgent = options.userAgent ?? 'cos-webhooks/1';
  const policy = { allowHttp: options.allowHttp === true, allowPrivate: options.allowPrivate === true };
  const hosts = options.hosts ?? dnsHostResolver;

  /**
   * node:net's lookup hook: one resolution per connection, every address checked, only checked
   * addresses handed to the socket (the family filter of a single-family lookup applied after).
   */
  const checkedLookup: LookupFunction = (hostname, lookupOptions, callback) => {
    hosts.resolve(hostname).then(
      (addresses) => {
        const done = callback as (err: NodeJS.ErrnoException | null, address: unknown, family?: number) => void;
        if (addresses.length === 0) {
          done(Object.assign(new Error(`${hostname} does not resolve`), { code: 'ENOTFOUND' }), '');
          return;
        }
        for (const address of addresses) {
          const refusal = addressRefusal(address, policy, hostname);
          if (refusal !== null) {
            done(new RefusedDestination(refusal.reason), '');
            return;
          }
        }
        const all = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
        const wanted = lookupOptions.family === 4 || lookupOptions.family === 6 ? all.filter((a) => a.family === lookupOptions.family) : all;
        if (wanted.length === 0) {
          done(Object.assign(new Error(`${hostname} has no IPv${String(lookupOptions.family)} address`), { code: 'ENOTFOUND' }), '');
          return;
        }
        if (lookupOptions.all === true) done(null, wanted);
        else done(null, wanted[0]!.address, wanted[0]!.family);
      },
      (error: unknown) => (callback as (err: unknown, address: string) => void)(error, ''),
    );
  };

  return {
    async send(request: WebhookRequest): Promise<WebhookResult> {
      let headers: Record<string, string>;
      try {
        headers = signedHeaders(request);
      } catch {
        return { ok: false, error: 'the signing secret is not valid base64' };
      }
      let url: URL;
      try {
        url = new URL(request.url);
      } catch {
        return { ok: false, error: 'request failed (the endpoint is not a valid URL)' };
      }
      if (url.username !== '' || url.password !== '') return { ok: false, error: 'request failed (the endpoint URL holds a user or password)' };
      const refusal = urlRefusal(url, policy);
      if (refusal !== null) return { ok: false, error: refusal.reason };

      const timeout = AbortSignal.timeout(request.timeoutMs);
      const signal = request.signal === undefined ? timeout : AbortSignal.any([timeout, request.signal]);
      const body = Buffer.from(request.body, 'utf8');
      const requestOptions: RequestOptions & { ca?: WebhookSenderOptions['ca'] } = {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(body.length), 'user-agent': userAgent },
        // One connection per attempt: resolved and checked for this attempt, closed after it.
        agent: false,
        lookup: checkedLookup,
        signal,
        ...(options.ca !== undefined && url.protocol === 'https:' ? { ca: options.ca } : {}),
      };

      return new Promise<WebhookResult>((resolve) => {
        let settled = false;
        let req: ClientRequest | undefined;
        const settle = (result: WebhookResult): void => {
          if (settled) return;
          settled = true;
          // The status is all that counts: drop the connection without reading the body.
          req?.destroy();
          resolve(result);
        };
        try {
          req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, requestOptions as RequestOptions);
        } catch (error) {
          settle({ ok: false, error: describeFailure(error, request.timeoutMs, timeout.aborted) });
          return;
        }
        req.on('response', (response: IncomingMessage) => {
          const status = response.statusCode ?? 0;
          response.destroy();
          settle(status >= 200 && status < 300 ? { ok: true, status } : { ok: false, error: `answered ${status}` });
        });
        req.on('error', (error) => settle({ ok: false, error: describeFailure(error, request.timeoutMs, timeout.aborted) }));
        req.end(body);
      });
    },
  };
}
