/**
 * The write side of the credential cache's freshness rule (C-36, C-57). A unit of work that changes
 * what an authentication answers, or an organisation record a cache holds, names the organisations
 * it changes when it is run: `unitOfWork.changeCredentials([orgId], work)` (only its stores have the
 * credential-affecting writes; `unitOfWork.run` passes through unfenced).
 * The fenced unit of work registers each declared change in the shared counter store
 * (CredentialFreshness.beginChange: a marker that expires after the change bound, and a new token)
 * BEFORE the transaction opens, so no Redis round trip happens while a database transaction is
 * open; after the transaction has committed (or rolled back) it ends them (endChange: a new token
 * again, marker removed). No cache fills while a marker lives, none trusts an entry while one lives,
 * and every entry filled before the change carries a token the change replaced
 * (credential-cache.ts explains the reader's side).
 *
 * The declaration is checked where the write happens too: every store refuses a credential-affecting
 * write (ApiKeyStore.revoke, shortenExpiry and update, OrganisationStore.update and putKeyPolicy) of an
 * organisation its unit of work did not name (UndeclaredCredentialChangeError, nothing written), so
 * a write that gets past the types (a cast, a wrong id) fails at once instead of leaving stale
 * credentials in caches. Creating an organisation or issuing a key changes no cached entry (caches
 * never hold negative answers) and runs through `run`.
 *
 * Strict (the cache is on): a change that cannot be registered fails with 503 before the transaction
 * opens, so nothing is written. Once the transaction has committed the change is answered as made
 * even when its end cannot be announced (after brief retries): a warning is logged, and the
 * organisation's marker, which outlives any transaction (the store's 2 s deadline, C-17), keeps every
 * cache off the organisation until it expires by itself. Best effort (the cache is off on this
 * instance): a failed begin is only logged, so writes do not depend on Redis, while instances that
 * still cache (a rolling switch-off) normally see the change.
 */
import { freshnessKeys } from './counter-keys.js';
import { UnavailableError } from '../domain/errors.js';
import type { LogThrottle } from '../log-throttle.js';
import type { CredentialFreshness } from '../ports/credential-freshness.js';
import type { Logger } from '../ports/logger.js';
import type { Random } from '../ports/random.js';
import type { OuterStores, Stores, UnitOfWork } from '../ports/unit-of-work.js';
import { withTimeout } from './timeout.js';

/** Attempts at ending a committed change before giving up with a warning, and the pause between them. */
const END_ATTEMPTS = 3;
const END_RETRY_DELAY_MS = 25;

/**
 * What a core does with its CredentialFreshness (CreateCoreOptions.fenceMode):
 * - 'cache': every declared credential change is fenced strictly (refused with 503 before anything
 *   is written when it cannot be) and the HTTP hot path caches credentials (credential-cache.ts);
 * - 'strict': fenced strictly, nothing cached (a process that never authenticates requests: an
 *   operator command, whose own freshness decides which failures it may pass over);
 * - 'best-effort': a change whose fence fails is logged and made, nothing cached (CREDENTIAL_CACHE=off).
 */
export type FenceMode = 'cache' | 'strict' | 'best-effort';

export interface FenceOptions {
  readonly freshness: CredentialFreshness;
  /** Bound on one begin/end call. */
  readonly timeoutMs: number;
  /** true: a change that cannot be registered is refused with 503; false: logged and made anyway. */
  readonly strict: boolean;
  readonly random: Random;
  readonly logger: Logger;
  /** Each warning at most once per FENCE_WARN_INTERVAL_MS, by message, on the Clock port (C-54's rule for log lines). */
  readonly warnings: LogThrottle;
}

export const FENCE_WARN_INTERVAL_MS = 10_000;

function warn(options: FenceOptions, reason: string, message: string): void {
  if (options.warnings.pass(message) === null) return;
  options.logger.warn({ component: 'credential-fence', reason }, message);
}

/** 503 before anything was written: the change could not be registered in the shared counter store. */
export const FENCE_UNAVAILABLE_MESSAGE =
  'The change could not be confirmed to every instance (the shared counter store is unreachable); nothing was changed; retry with exponential backoff';

/** The warning logged when a committed change's end could not be announced. */
export const FENCE_END_UNANNOUNCED_WARNING =
  'credential change committed but its end could not be announced; caches bypass the organisation until its marker expires';

/** One unit of work's set of organisations being changed. */
class Change {
  readonly id: string;
  private readonly begun: string[] = [];

  constructor(private readonly options: FenceOptions) {
    this.id = options.random.uuid();
  }

  /** Registers the change of `organisationId`; strict: UnavailableError when it cannot be. */
  async begin(organisationId: string): Promise<void> {
    const outcome = await withTimeout(() => this.options.freshness.beginChange(freshnessKeys(organisationId), this.id), this.options.timeoutMs);
    if (outcome.kind === 'value') {
      this.begun.push(organisationId);
      return;
    }
    // Not ended either: a begin that failed wrote nothing, and one that still lands later (a frozen
    // Redis waking up) only holds the organisation's caches off until its marker expires: the safe side.
    const reason = outcome.kind === 'error' ? describe(outcome.error) : `no answer within ${this.options.timeoutMs} ms`;
    if (!this.options.strict) {
      warn(this.options, reason, 'credential change not announced to the shared counter store (cache off here)');
      return;
    }
    warn(this.options, reason, 'credential changes refused: the shared counter store is unreachable');
    throw new UnavailableError(FENCE_UNAVAILABLE_MESSAGE, { cause: outcome.kind === 'error' ? outcome.error : undefined, reason: 'credential_fence' });
  }

  /** After the commit (or the rollback); a failure is logged, never thrown (the markers expire by themselves). */
  async end(): Promise<void> {
    for (const organisationId of this.begun) {
      let ended = false;
      let reason = '';
      for (let attempt = 0; attempt < END_ATTEMPTS && !ended; attempt++) {
        if (attempt > 0) await new Promise((r) => setTimeout(r, END_RETRY_DELAY_MS));
        const outcome = await withTimeout(() => this.options.freshness.endChange(freshnessKeys(organisationId), this.id), this.options.timeoutMs);
        ended = outcome.kind === 'value';
        if (!ended) reason = outcome.kind === 'error' ? describe(outcome.error) : `no answer within ${this.options.timeoutMs} ms`;
      }
      if (!ended) warn(this.options, reason, FENCE_END_UNANNOUNCED_WARNING);
    }
  }
}

/** A unit of work whose declared credential changes are fenced (see the module comment). */
export class FencedUnitOfWork implements UnitOfWork {
  constructor(
    private readonly inner: UnitOfWork,
    private readonly options: FenceOptions,
  ) {}

  /** Changes no credential: nothing to announce. */
  run<T>(work: (stores: OuterStores) => Promise<T>): Promise<T> {
    return this.inner.run(work);
  }

  async changeCredentials<T>(organisationIds: readonly string[], work: (stores: Stores) => Promise<T>): Promise<T> {
    if (organisationIds.length === 0) return this.inner.changeCredentials(organisationIds, work);
    const change = new Change(this.options);
    try {
      for (const organisationId of new Set(organisationIds)) await change.begin(organisationId);
      return await this.inner.changeCredentials(organisationIds, work);
    } finally {
      await change.end();
    }
  }
}

function describe(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}
