/**
 * The sweep of expired Idempotency-Key answers (they expire after 24 h): a long-running host deletes
 * them at start and then every `intervalMs`. Every instance sweeps: a sweep is one indexed DELETE,
 * harmless when another instance just ran it.
 */
import type { Logger } from '../ports/logger.js';
import { PeriodicTask } from './periodic-task.js';
import type { Idempotency } from '../operations/idempotency.js';

export const DEFAULT_IDEMPOTENCY_SWEEP_INTERVAL_MS = 15 * 60_000;

export interface IdempotencySweepDeps {
  readonly idempotency: Pick<Idempotency, 'sweep'>;
  readonly logger: Logger;
  /** Time between two sweeps (default DEFAULT_IDEMPOTENCY_SWEEP_INTERVAL_MS). */
  readonly intervalMs?: number;
}

export class IdempotencySweep {
  readonly intervalMs: number;
  private readonly task: PeriodicTask;

  constructor(private readonly deps: IdempotencySweepDeps) {
    this.intervalMs = deps.intervalMs ?? DEFAULT_IDEMPOTENCY_SWEEP_INTERVAL_MS;
    this.task = new PeriodicTask(() => this.sweepOnce(), this.intervalMs, deps.logger, 'idempotency key sweep failed; the next one retries');
  }

  /** One sweep; returns how many expired answers it deleted. */
  async sweepOnce(): Promise<number> {
    const swept = await this.deps.idempotency.sweep();
    if (swept > 0) this.deps.logger.info({ swept }, 'expired idempotency keys deleted');
    return swept;
  }

  /** Sweeps now, then every intervalMs until stop(). */
  start(): void {
    this.task.start();
  }

  /** Stops the timer and waits for a sweep in progress. */
  stop(): Promise<void> {
    return this.task.stop();
  }
}
