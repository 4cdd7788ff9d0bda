import type { CoreDeps } from '../deps.js';
import { withTimeout } from '../access/timeout.js';

export interface HealthReport {
  readonly status: 'ok' | 'unavailable';
  /** ISO 8601 UTC with a trailing Z (C-4). */
  readonly timestamp: string;
}

/** C-4: ok when the store answers the probe within config.healthTimeoutMs, else unavailable. Never throws. */
export class Health {
  constructor(private readonly deps: Pick<CoreDeps, 'health' | 'clock' | 'config'>) {}

  async check(): Promise<HealthReport> {
    const outcome = await withTimeout(() => this.deps.health.ping(), this.deps.config.healthTimeoutMs);
    return { status: outcome.kind === 'value' ? 'ok' : 'unavailable', timestamp: this.deps.clock.now().toISOString() };
  }
}
