import { InProcessRateCounter } from '../access/in-process-counter.js';

/**
 * The in-process RateCounter under the name the testing API promised: one implementation, shared
 * with production (C-55). A window is forgotten `ttlMs` after its first hit, measured on the given
 * clock (default: the system clock; pass the test's FakeClock to move time by hand).
 */
export class InMemoryRateCounter extends InProcessRateCounter {}
