import { randomBytes, randomUUID } from 'node:crypto';
import type { Clock } from './ports/clock.js';
import type { Logger } from './ports/logger.js';
import type { Metrics } from './ports/metrics.js';
import type { Random } from './ports/random.js';

export const systemClock: Clock = Object.freeze({ now: () => new Date() });

/** node:crypto, a CSPRNG. */
export const cryptoRandom: Random = Object.freeze({
  bytes: (n: number) => randomBytes(n),
  uuid: () => randomUUID(),
});

const noop = (): void => undefined;
export const silentLogger: Logger = Object.freeze({ debug: noop, info: noop, warn: noop, error: noop });

/** Metrics that go nowhere: the default when nobody reads them (no OPS_PORT, an embedder without its own). */
export const noopMetrics: Metrics = Object.freeze({
  httpRequest: noop,
  rateLimitDecision: noop,
  rateCounterFailOpen: noop,
  storeError: noop,
  authFailure: noop,
  webhookDelivery: noop,
});
