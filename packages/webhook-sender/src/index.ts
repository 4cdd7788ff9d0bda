/**
 * @cos/webhook-sender: the WebhookSender port over HTTP, signed by the Standard Webhooks scheme
 * (the `standardwebhooks` library): headers `webhook-id`, `webhook-timestamp` (epoch seconds) and
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, body the notification's JSON.
 *
 * One attempt is bounded by its `timeoutMs` (connection, request, answer and reading it). Only a
 * 2xx answer is a delivery; redirects are not followed (a 3xx is a failure: the endpoint is the URL
 * the operator set, nothing else). Failures are results, never thrown, and hold no response body.
 */
import type { WebhookRequest, WebhookResult, WebhookSender } from '@cos/core';
import { Webhook } from 'standardwebhooks';

export interface WebhookSenderOptions {
  /** `User-Agent` of the requests. Default `cos-webhooks/1`. */
  readonly userAgent?: string;
}

/** Any URL quoted in an error text (fetch quotes the whole URL, credentials and query included, for one with a user). */
const URL_IN_TEXT = /[a-z][a-z0-9+.-]*:\/\/\S*/gi;

/** The reason of a failed fetch, short and without a URL's query or credentials. */
function describeFailure(error: unknown, timeoutMs: number): string {
  const e = error as { name?: string; cause?: { code?: string; message?: string }; message?: string };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return `no answer within ${timeoutMs} ms`;
  const code = e?.cause?.code;
  if (typeof code === 'string') return `connection failed (${code})`;
  const reason = String(e?.cause?.message ?? e?.message ?? String(error)).replace(URL_IN_TEXT, '<url>');
  return `request failed (${reason})`.slice(0, 200);
}

/** Signs one request's headers (exported for tests and for receivers written against this service). */
export function signedHeaders(request: Pick<WebhookRequest, 'secret' | 'messageId' | 'timestamp' | 'body'>): Record<string, string> {
  return {
    'webhook-id': request.messageId,
    'webhook-timestamp': String(Math.floor(request.timestamp.getTime() / 1000)),
    'webhook-signature': new Webhook(request.secret).sign(request.messageId, request.timestamp, request.body),
  };
}

export function createWebhookSender(options: WebhookSenderOptions = {}): WebhookSender {
  const userAgent = options.userAgent ?? 'cos-webhooks/1';
  return {
    async send(request: WebhookRequest): Promise<WebhookResult> {
      let headers: Record<string, string>;
      try {
        headers = signedHeaders(request);
      } catch {
        return { ok: false, error: 'the signing secret is not valid base64' };
      }
      try {
        const response = await fetch(request.url, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json', 'user-agent': userAgent },
          body: request.body,
          redirect: 'manual',
          signal: AbortSignal.timeout(request.timeoutMs),
        });
        // Read (and drop) the answer within the same bound, so the connection is reusable.
        await response.arrayBuffer();
        if (response.status >= 200 && response.status < 300) return { ok: true, status: response.status };
        return { ok: false, error: `answered ${response.status}` };
      } catch (error) {
        return { ok: false, error: describeFailure(error, request.timeoutMs) };
      }
    },
  };
}
