/**
 * A background task of a long-running host: runs now, then `intervalMs` after each run has ended,
 * until stop(). A run that fails is logged at warn (`failure`, with the error's message) and the task
 * runs again at the next interval. The timer never keeps the process alive, and stop() waits for a
 * run in progress. The retention workers, the idempotency sweep and the expiry notices scan each
 * run one.
 */
import type { Logger } from '../ports/logger.js';

export class PeriodicTask {
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  private current: Promise<void> | null = null;

  constructor(
    private readonly run: () => Promise<unknown>,
    private readonly intervalMs: number,
    private readonly logger: Logger,
    private readonly failure: string,
  ) {}

  /** Runs now, then every intervalMs until stop(). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  /** Stops the timer and waits for a run in progress. */
  async stop(): Promise<void> {
    this.running = false;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.current;
  }

  private schedule(delayMs: number): void {
    if (!this.running) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.current = this.run()
        .then(
          () => undefined,
          (e: unknown) => {
            this.logger.warn({ err: e instanceof Error ? e.message : String(e) }, this.failure);
          },
        )
        .then(() => this.schedule(this.intervalMs));
    }, delayMs);
    this.timer.unref();
  }
}
