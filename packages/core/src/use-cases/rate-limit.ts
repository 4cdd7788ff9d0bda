import type { RateDecision } from '../domain/rate-window.js';
import type { CoreDeps } from './deps.js';

/** What is counted (C-50): an organisation, the global unauthenticated counter, or a source address (401s). */
export type RateScope =
  | { readonly kind: 'organisation'; readonly organisationId: string }
  | { readonly kind: 'unauthenticated' }
  | { readonly kind: 'source'; readonly address: string };

/**
 * The rate-limit decision (spec §8, C-50..C-55). Counts one hit of the scope in the current UTC
 * minute through the RateCounter port, bounded by config.rateCounterTimeoutMs: on failure or
 * timeout it fails open (allowed, remaining = limit, degraded) and logs a warning at most once per
 * 10 s while the counter stays down, and one info line when it recovers. Scopes already over their
 * limit are remembered locally until their window ends, so a flooding scope costs no counter call.
 */
export class RateLimiter {
  constructor(private readonly deps: Pick<CoreDeps, 'counter' | 'clock' | 'logger' | 'config'>) {}

  /** Limit for a scope: organisation/source -> rateLimitPerMinute; unauthenticated -> unauthRateLimitPerMinute. */
  limitFor(scope: RateScope): number {
    throw new Error('TODO: implement');
  }

  /** Counts the hit and returns the decision; never throws. */
  check(scope: RateScope): Promise<RateDecision> {
    throw new Error('TODO: implement');
  }

  /** check(), then throws RateLimitedError(decision) when not allowed; returns the decision otherwise. */
  enforce(scope: RateScope): Promise<RateDecision> {
    throw new Error('TODO: implement');
  }

  /**
   * Headers-only view of a scope without counting a hit (for a 401 whose source counter is
   * not incremented, etc.): the current window with remaining = limit.
   */
  peek(scope: RateScope): RateDecision {
    throw new Error('TODO: implement');
  }
}
