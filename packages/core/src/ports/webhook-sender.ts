/** One signed delivery attempt (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature). */
export interface WebhookRequest {
  readonly url: string;
  /** The endpoint's signing secret (`whsec_` + base64). */
  readonly secret: string;
  /**
   * The secret a rotation replaced, while its overlap lasts: the request then carries both
   * signatures in `webhook-signature`, space-separated, the one with `secret` first.
   */
  readonly previousSecret?: string;
  /** `webhook-id`: the notification id, the same on every attempt. */
  readonly messageId: string;
  /** `webhook-timestamp`: when this attempt is made. */
  readonly timestamp: Date;
  /** The exact JSON body, signed as sent. */
  readonly body: string;
  /** The attempt's bound: connection, request and response together. */
  readonly timeoutMs: number;
  /**
   * Aborted when the attempt is abandoned (the sender shuts down): the sender should stop at once
   * and answer a failure. The caller does not wait for that answer: it treats the attempt as ended.
   */
  readonly signal?: AbortSignal;
}

/** How an attempt ended: a 2xx answer, or why not (no key material, no response body). */
export type WebhookResult = { readonly ok: true; readonly status: number } | { readonly ok: false; readonly error: string };

/** Signs and sends one webhook (implemented by @cos/webhook-sender). Never throws: failures are results. */
export interface WebhookSender {
  send(request: WebhookRequest): Promise<WebhookResult>;
}

/**
 * Resolves an endpoint's host name to the addresses a sender would connect to (DNS, implemented by
 * @cos/webhook-sender), so that a name pointing inside is refused when the endpoint is configured.
 * Delivery resolves again and checks the address it connects to: this is early feedback, not the
 * guard. Returns [] when the name does not resolve (now); never throws.
 */
export interface WebhookHostResolver {
  resolve(hostname: string): Promise<readonly string[]>;
}
