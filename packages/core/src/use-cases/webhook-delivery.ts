/**
 * Delivering the outbox (C-59): at least once, signed, retried with exponential backoff and jitter,
 * bounded in attempts, then `failed`. Each attempt starts with a claim (a lease longer than the
 * attempt's timeout), so several instances on one database never start the same attempt; a sender
 * that dies mid-delivery leaves its lease to expire and the notification is sent again (a receiver
 * drops repeats by `webhook-id`). Outcomes are recorded only under the claim that made the attempt.
 */
import type { Notification } from '../domain/webhook.js';
import type { Clock } from '../ports/clock.js';
import type { Logger } from '../ports/logger.js';
import type { AttemptOutcome } from '../ports/outbox.js';
import type { Random } from '../ports/random.js';
import type { Stores } from '../ports/unit-of-work.js';
import type { WebhookSender } from '../ports/webhook-sender.js';
import { PLAINTEXT_WEBHOOK_SECRETS, WebhookSecretUnreadableError, type WebhookSecretCipher } from '../domain/webhook-secret-cipher.js';

export interface WebhookDeliveryOptions {
  /** Bound on one attempt (WEBHOOK_TIMEOUT_MS). */
  readonly timeoutMs: number;
  /** Attempts before a notification is `failed` (WEBHOOK_MAX_ATTEMPTS). */
  readonly maxAttempts: number;
  /** Delay after the first failed attempt; each later one is 4 times the previous (WEBHOOK_RETRY_BASE_MS). */
  readonly retryBaseMs: number;
  /** Longest delay between two attempts. */
  readonly retryMaxMs: number;
  /** How often the outbox is polled (WEBHOOK_POLL_INTERVAL_MS). */
  readonly pollIntervalMs: number;
  /** Notifications claimed (and sent concurrently) per round. */
  readonly batchSize: number;
}

/**
 * Defaults: 10 attempts, 5 s after the first failure and 4 times longer each time up to 8 h
 * (5 s, 20 s, 80 s, 5 min, 21 min, 85 min, 5.7 h, 8 h, 8 h): the last attempt about 24 h after
 * the first.
 */
export const DEFAULT_WEBHOOK_DELIVERY: WebhookDeliveryOptions = Object.freeze({
  timeoutMs: 10_000,
  maxAttempts: 10,
  retryBaseMs: 5_000,
  retryMaxMs: 8 * 60 * 60 * 1000,
  pollIntervalMs: 1_000,
  batchSize: 10,
});

const RETRY_FACTOR = 4;
/** Jitter: each delay is scaled by a factor drawn uniformly from [0.8, 1.2). */
const JITTER = 0.4;
/**
 * A claim's lease: twice the attempt's timeout plus a second, so it outlives the attempt and the
 * write of its outcome; a sender that died is replaced once it ends.
 */
export function leaseMs(timeoutMs: number): number {
  return 2 * timeoutMs + 1_000;
}
/** At most one failed-attempt line per this many ms; the next line says how many were left out. */
export const DELIVERY_WARN_INTERVAL_MS = 10_000;
export const NO_ENDPOINT_ERROR = 'the organisation has no webhook endpoint';

/** The delay before attempt `attempts + 1`, after `attempts` failed ones (no jitter). */
export function retryDelayMs(attempts: number, options: Pick<WebhookDeliveryOptions, 'retryBaseMs' | 'retryMaxMs'>): number {
  return Math.min(options.retryMaxMs, options.retryBaseMs * RETRY_FACTOR ** Math.max(0, attempts - 1));
}

export interface DeliveryDeps {
  readonly stores: Stores;
  readonly sender: WebhookSender;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  readonly options?: Partial<WebhookDeliveryOptions>;
  /** Told of every attempt's result (metrics). */
  readonly onAttempt?: (result: 'delivered' | 'retry' | 'failed') => void;
  /** Opens the stored signing secrets (default: stored in clear). */
  readonly secrets?: WebhookSecretCipher;
}

export class WebhookDelivery {
  readonly options: WebhookDeliveryOptions;
  private readonly claimPrefix: string;
  private claims = 0;
  private lastWarnMs = Number.NEGATIVE_INFINITY;
  private suppressed = 0;
  private timer: NodeJS.Timeout | null = null;
  private round: Promise<void> | null = null;
  private running = false;

  constructor(private readonly deps: DeliveryDeps) {
    this.options = { ...DEFAULT_WEBHOOK_DELIVERY, ...deps.options };
    this.claimPrefix = deps.random.uuid();
  }

  /** One round: claims the due notifications (at most batchSize) and attempts them. Returns how many. */
  async deliverDue(): Promise<number> {
    const now = this.deps.clock.now();
    const leaseUntil = new Date(now.getTime() + leaseMs(this.options.timeoutMs));
    const claim = `${this.claimPrefix}:${++this.claims}`;
    const due = await this.deps.stores.outbox.claimDue(now, leaseUntil, this.options.batchSize, claim);
    await Promise.all(due.map((n) => this.attempt(n, claim)));
    return due.length;
  }

  /** Polls the outbox until stop(): a full batch is followed at once by the next round. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  /** Stops polling and waits for the round in progress (its attempts are bounded by timeoutMs). */
  async stop(): Promise<void> {
    this.running = false;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.round;
  }

  private schedule(delayMs: number): void {
    if (!this.running) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.round = this.deliverDue()
        .then((n) => this.schedule(n >= this.options.batchSize ? 0 : this.options.pollIntervalMs))
        .catch((e: unknown) => {
          this.warn({ err: e instanceof Error ? e.message : String(e) }, 'webhook outbox unavailable; retrying');
          this.schedule(this.options.pollIntervalMs);
        });
    }, delayMs);
    this.timer.unref();
  }

  private async attempt(n: Notification, claim: string): Promise<void> {
    const endpoint = await this.deps.stores.webhooks.get(n.organisationId);
    let outcome: AttemptOutcome;
    if (endpoint === null) {
      outcome = { status: 'failed', at: this.deps.clock.now(), error: NO_ENDPOINT_ERROR };
    } else {
      // A secret sealed under a key this instance lacks fails the attempt with that reason (as a
      // receiver's error would): it is retried, so configuring the key in time delivers it.
      const secret = this.openSecret(n.organisationId, endpoint.secret);
      const result =
        typeof secret !== 'string'
          ? secret
          : await this.deps.sender.send({
              url: endpoint.url,
              secret,
              messageId: n.id,
              timestamp: this.deps.clock.now(),
              body: n.payload,
              timeoutMs: this.options.timeoutMs,
            });
      const at = this.deps.clock.now();
      if (result.ok) outcome = { status: 'delivered', at };
      else if (n.attempts >= this.options.maxAttempts) outcome = { status: 'failed', at, error: result.error };
      else {
        const jitter = 1 - JITTER / 2 + JITTER * this.unitRandom();
        const delay = Math.round(retryDelayMs(n.attempts, this.options) * jitter);
        outcome = { status: 'pending', nextAttemptAt: new Date(at.getTime() + delay), error: result.error };
      }
    }
    const recorded = await this.deps.stores.outbox.complete(n.id, claim, outcome);
    this.deps.onAttempt?.(outcome.status === 'delivered' ? 'delivered' : outcome.status === 'failed' ? 'failed' : 'retry');
    if (outcome.status !== 'delivered') {
      this.warn(
        {
          notification_id: n.id,
          organisation_id: n.organisationId,
          event: n.type,
          attempt: n.attempts,
          error: outcome.error,
          ...(outcome.status === 'pending' ? { next_attempt_at: outcome.nextAttemptAt.toISOString() } : {}),
          ...(recorded ? {} : { stale_claim: true }),
        },
        outcome.status === 'failed' ? 'webhook delivery failed; giving up' : 'webhook delivery attempt failed; will retry',
      );
    }
  }

  private openSecret(organisationId: string, stored: string): string | { readonly ok: false; readonly error: string } {
    try {
      return (this.deps.secrets ?? PLAINTEXT_WEBHOOK_SECRETS).open(organisationId, stored);
    } catch (e) {
      if (e instanceof WebhookSecretUnreadableError) return { ok: false, error: e.message };
      throw e;
    }
  }

  /** A number in [0, 1) from the Random port. */
  private unitRandom(): number {
    const b = this.deps.random.bytes(4);
    return (((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0) / 2 ** 32;
  }

  private warn(fields: Record<string, unknown>, message: string): void {
    const nowMs = this.deps.clock.now().getTime();
    if (nowMs - this.lastWarnMs < DELIVERY_WARN_INTERVAL_MS) {
      this.suppressed += 1;
      return;
    }
    this.lastWarnMs = nowMs;
    const suppressed = this.suppressed;
    this.suppressed = 0;
    this.deps.logger.warn(suppressed > 0 ? { ...fields, suppressed } : fields, message);
  }
}
