/**
 * Delivering the outbox (C-59): at least once, signed, retried with exponential backoff and jitter,
 * bounded in attempts, then `failed`. Each attempt starts with a claim (a lease longer than the
 * attempt's timeout), so several instances on one database never start the same attempt; a sender
 * that dies mid-delivery leaves its lease to expire and the notification is sent again (a receiver
 * drops repeats by `webhook-id`). Outcomes are recorded only under the claim that made the attempt.
 *
 * Per endpoint (one per organisation): the outbox hands out at most one notification of an
 * organisation at a time, its due one written first, so a slow or dead endpoint delays only its own
 * notifications and a healthy one receives them in write order. Up to `batchSize` attempts (each to
 * another endpoint) run at once; as soon as one ends, its slot is used for the next claim, which
 * may be the next notification of the same endpoint. A notification waiting for its next attempt
 * does not hold back its endpoint's later ones: after a failed attempt they may arrive before it.
 *
 * stop() abandons the attempts in flight: each is aborted and its claim released, so it is due
 * again at once for another instance or the next start (the receiver may see it twice).
 */
import type { Notification } from '../domain/webhook.js';
import type { Clock } from '../ports/clock.js';
import type { Logger } from '../ports/logger.js';
import type { Metrics, WebhookDeliveryResult } from '../ports/metrics.js';
import type { AttemptOutcome } from '../ports/outbox.js';
import type { Random } from '../ports/random.js';
import type { OuterStores } from '../ports/unit-of-work.js';
import type { WebhookRequest, WebhookResult, WebhookSender } from '../ports/webhook-sender.js';
import { PLAINTEXT_WEBHOOK_SECRETS, WebhookSecretUnreadableError, type WebhookSecretCipher } from '../domain/webhook-secret-cipher.js';
import { LogThrottle } from '../log-throttle.js';
import { noopMetrics } from '../defaults.js';

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
  /** Most attempts in flight at once, each to a different endpoint (WEBHOOK_CONCURRENCY). */
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
  batchSize: 32,
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
  readonly stores: OuterStores;
  readonly sender: WebhookSender;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  readonly options?: Partial<WebhookDeliveryOptions>;
  /** Where every attempt's result is reported (Metrics.webhookDelivery; default noopMetrics). */
  readonly metrics?: Metrics;
  /** Opens the stored signing secrets (default: stored in clear). */
  readonly secrets?: WebhookSecretCipher;
}

/** How an attempt's recorded outcome is counted: a pending one is a retry. */
function resultOf(outcome: AttemptOutcome): WebhookDeliveryResult {
  return outcome.status === 'pending' ? 'retry' : outcome.status;
}

/** An attempt in progress: aborted by stop(); `done` settles once its outcome is recorded or its claim released. */
interface InFlight {
  readonly controller: AbortController;
  done: Promise<void>;
}

export class WebhookDelivery {
  readonly options: WebhookDeliveryOptions;
  private readonly metrics: Metrics;
  private readonly claimPrefix: string;
  private claims = 0;
  private readonly warnings = new LogThrottle(DELIVERY_WARN_INTERVAL_MS, () => this.deps.clock.now().getTime());
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  /** Set by stop(): attempts claimed from now on are released at once instead of made. */
  private stopping = false;
  /** Every attempt in progress (the polling loop's and deliverDue's). */
  private readonly inFlight = new Set<InFlight>();
  /** The polling loop's claim in progress (one at a time). */
  private claiming: Promise<void> | null = null;
  /** An attempt ended while the loop was claiming: claim again right after. */
  private claimAgain = false;
  /** Attempts abandoned by stop() whose claims were released. */
  private released = 0;

  constructor(private readonly deps: DeliveryDeps) {
    this.options = { ...DEFAULT_WEBHOOK_DELIVERY, ...deps.options };
    this.metrics = deps.metrics ?? noopMetrics;
    this.claimPrefix = deps.random.uuid();
  }

  /**
   * Attempts everything due now (as of the call), per endpoint one at a time in write order, with up
   * to batchSize attempts at once; returns how many attempts it made. Each notification is attempted
   * at most once per call (a failed one is due again only later). For embedders and tests that drive
   * delivery themselves; `start()` runs the same continuously.
   */
  async deliverDue(): Promise<number> {
    const asOf = this.deps.clock.now();
    const mine = new Set<Promise<void>>();
    let attempted = 0;
    for (;;) {
      const free = this.options.batchSize - mine.size;
      // After stop() nothing more is claimed (what was claimed is released).
      if (free > 0 && !this.stopping) {
        for (const started of await this.claimAndStart(asOf, free)) {
          const done: Promise<void> = started.done.then(() => void mine.delete(done));
          mine.add(done);
          attempted += 1;
        }
      }
      if (mine.size === 0) return attempted;
      // An attempt that ends frees a slot and may make its endpoint's next notification claimable.
      await Promise.race(mine);
    }
  }

  /** Delivers continuously until stop(): claims whenever a slot is free and something is due, else polls. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.stopping = false;
    this.pump();
  }

  /**
   * Stops claiming and abandons the attempts in flight: each is aborted (the sender is told through
   * its signal, and not waited for) and its claim released, so it is due again at once. Resolves
   * once every claim is released (or, with the store down, left to lapse at its lease's end).
   */
  async stop(): Promise<void> {
    this.running = false;
    this.stopping = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    for (const a of this.inFlight) a.controller.abort();
    // A claim in progress: what it hands out is released at once (stopping is set).
    await this.claiming;
    await Promise.all([...this.inFlight].map((a) => a.done));
    if (this.released > 0) {
      this.deps.logger.info({ released: this.released }, 'webhook deliveries in flight abandoned at shutdown; due again at once');
      this.released = 0;
    }
  }

  /** Claims for the free slots, unless a claim is in progress (then once it is done). */
  private pump(): void {
    if (!this.running) return;
    if (this.claiming !== null) {
      this.claimAgain = true;
      return;
    }
    const free = this.options.batchSize - this.inFlight.size;
    // All slots busy: the next attempt to end calls pump() again.
    if (free <= 0) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.claimAgain = false;
    this.claiming = this.claimAndStart(this.deps.clock.now(), free).then(
      (started) => {
        this.claiming = null;
        if (this.claimAgain) this.pump();
        else if (started.length < free) this.schedule(this.options.pollIntervalMs);
      },
      (e: unknown) => {
        this.claiming = null;
        this.warn({ err: e instanceof Error ? e.message : String(e) }, 'webhook outbox unavailable; retrying');
        this.schedule(this.options.pollIntervalMs);
      },
    );
  }

  private schedule(delayMs: number): void {
    if (!this.running) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.pump();
    }, delayMs);
    this.timer.unref();
  }

  /** One claim of at most `limit` due notifications (as of `now`), each attempt started. */
  private async claimAndStart(now: Date, limit: number): Promise<InFlight[]> {
    const leaseUntil = new Date(this.deps.clock.now().getTime() + leaseMs(this.options.timeoutMs));
    const claim = `${this.claimPrefix}:${++this.claims}`;
    const due = await this.deps.stores.outbox.claimDue(now, leaseUntil, limit, claim);
    return due.map((n) => {
      const entry: InFlight = { controller: new AbortController(), done: Promise.resolve() };
      if (this.stopping) entry.controller.abort();
      this.inFlight.add(entry);
      entry.done = this.attempt(n, claim, entry.controller.signal).finally(() => {
        this.inFlight.delete(entry);
        this.pump();
      });
      return entry;
    });
  }

  /** One attempt under `claim`; never rejects (a store failure is logged, and the claim lapses). */
  private async attempt(n: Notification, claim: string, signal: AbortSignal): Promise<void> {
    try {
      if (signal.aborted) return await this.release(n, claim);
      const endpoint = await this.deps.stores.webhooks.get(n.organisationId);
      let outcome: AttemptOutcome;
      if (endpoint === null) {
        outcome = { status: 'failed', at: this.deps.clock.now(), error: NO_ENDPOINT_ERROR };
      } else {
        // A secret sealed under a key this instance lacks fails the attempt with that reason (as a
        // receiver's error would): it is retried, so configuring the key in time delivers it.
        const secret = this.openSecret(n.organisationId, endpoint.secret);
        // A rotated-out secret still signs (second) until its overlap ends.
        const now = this.deps.clock.now();
        const overlapping =
          endpoint.previousSecret !== undefined &&
          endpoint.previousSecret !== null &&
          endpoint.previousSecretExpiresAt !== undefined &&
          endpoint.previousSecretExpiresAt !== null &&
          endpoint.previousSecretExpiresAt.getTime() > now.getTime();
        // One this instance cannot open (its key retired meanwhile) is left out: the new one still signs.
        const opened = overlapping ? this.openSecret(n.organisationId, endpoint.previousSecret!) : undefined;
        const previous = typeof opened === 'string' ? opened : undefined;
        const result =
          typeof secret !== 'string'
            ? secret
            : await this.send(
                {
                  url: endpoint.url,
                  secret,
                  ...(previous !== undefined ? { previousSecret: previous } : {}),
                  messageId: n.id,
                  timestamp: this.deps.clock.now(),
                  body: n.payload,
                  timeoutMs: this.options.timeoutMs,
                },
                signal,
              );
        if (result === null) return await this.release(n, claim);
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
      this.metrics.webhookDelivery(resultOf(outcome));
      if (outcome.status === 'failed' && recorded) {
        // Given up: one line per notification, from the claim that recorded it, never folded into
        // the throttled lines of failed attempts (an operator retries it by this id).
        this.deps.logger.error(
          { notification_id: n.id, organisation_id: n.organisationId, event: n.type, attempts: n.attempts, error: outcome.error },
          'webhook notification given up: no attempts left (cos-admin notifications retry <id> makes it due again)',
        );
      } else if (outcome.status !== 'delivered') {
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
          outcome.status === 'failed' ? 'webhook delivery failed; another instance recorded the outcome' : 'webhook delivery attempt failed; will retry',
        );
      }
    } catch (e) {
      this.warn({ notification_id: n.id, err: e instanceof Error ? e.message : String(e) }, 'webhook outbox unavailable; retrying');
    }
  }

  /** The sender's answer, or null once `signal` is aborted (the sender's own answer is then not waited for). */
  private send(request: WebhookRequest, signal: AbortSignal): Promise<WebhookResult | null> {
    if (signal.aborted) return Promise.resolve(null);
    return new Promise((resolve) => {
      const abandon = (): void => resolve(null);
      signal.addEventListener('abort', abandon, { once: true });
      this.deps.sender.send({ ...request, signal }).then(
        (result) => {
          signal.removeEventListener('abort', abandon);
          resolve(result);
        },
        (e: unknown) => {
          signal.removeEventListener('abort', abandon);
          resolve({ ok: false, error: `send failed (${e instanceof Error ? e.name : 'error'})` });
        },
      );
    });
  }

  private async release(n: Notification, claim: string): Promise<void> {
    if (await this.deps.stores.outbox.release(n.id, claim)) this.released += 1;
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
    const suppressed = this.warnings.pass();
    if (suppressed === null) return;
    this.deps.logger.warn(suppressed > 0 ? { ...fields, suppressed } : fields, message);
  }
}
