/**
 * The write side of the credential cache's freshness rule (issue 14, C-36, C-57): every store write
 * that can change what an authentication answers, or the organisation record a cache holds, is
 * fenced in the shared counter store. Inside its unit of work, before the first such write of an
 * organisation, the change is registered (CredentialFreshness.beginChange: a marker that expires
 * after the change bound, and a new token); after the unit of work has committed (or rolled back)
 * it is ended (endChange: a new token again, marker removed). No cache fills while a marker lives,
 * none trusts an entry while one lives, and every entry filled before the change carries a token
 * the change replaced (credential-cache.ts explains the reader's side).
 *
 * Which writes count is one list (CREDENTIAL_WRITES): a store method named there is fenced
 * wherever it is called through the stores handed to a unit of work or through the outer stores,
 * so a new credential-affecting method (e.g. ApiKeyStore.shortenExpiry for key rolling) only has to
 * be added to it. Its first argument must be the organisation id. Creating an organisation or
 * issuing a key changes no cached entry (caches never hold negative answers) and is not fenced.
 *
 * Strict (the cache is on): a change that cannot be registered fails with 503 before anything is
 * written; one whose end cannot be confirmed (after brief retries) answers 503 although it is
 * committed (repeating it is idempotent; its marker expires by itself). Best effort (the cache is
 * off on this instance): failures are only logged, so writes do not depend on Redis, while instances
 * that still cache (a rolling switch-off) normally see the change.
 */
import { UnavailableError } from '../domain/errors.js';
import type { CredentialFreshness } from '../ports/credential-freshness.js';
import type { Logger } from '../ports/logger.js';
import type { Random } from '../ports/random.js';
import type { Stores, UnitOfWork } from '../ports/unit-of-work.js';
import { withTimeout } from './timeout.js';

/** The store methods whose writes can affect an authentication or a cached organisation record. */
export const CREDENTIAL_WRITES: { readonly [S in keyof Stores]?: readonly string[] } = Object.freeze({
  apiKeys: Object.freeze(['revoke', 'shortenExpiry']),
  organisations: Object.freeze(['update', 'putKeyPolicy']),
});

/** Attempts at ending a committed change before answering 503, and the pause between them. */
export const END_ATTEMPTS = 3;
export const END_RETRY_DELAY_MS = 25;

export interface FenceOptions {
  readonly freshness: CredentialFreshness;
  /** Bound on one begin/end call. */
  readonly timeoutMs: number;
  /** true: failures are 503; false: logged and ignored. */
  readonly strict: boolean;
  readonly random: Random;
  readonly logger: Logger;
  /** Each warning at most once per FENCE_WARN_INTERVAL_MS (C-54's rule for log lines): message -> last logged (ms). */
  readonly lastWarned: Map<string, number>;
}

export const FENCE_WARN_INTERVAL_MS = 10_000;

function warn(options: FenceOptions, reason: string, message: string): void {
  const now = Date.now();
  if (now - (options.lastWarned.get(message) ?? Number.NEGATIVE_INFINITY) < FENCE_WARN_INTERVAL_MS) return;
  options.lastWarned.set(message, now);
  options.logger.warn({ component: 'credential-fence', reason }, message);
}

/** 503 before anything was written: the change could not be registered in the shared counter store. */
export const FENCE_UNAVAILABLE_MESSAGE =
  'The change could not be confirmed to every instance (the shared counter store is unreachable); nothing was changed; retry with exponential backoff';
/** 503 after the commit: the change is made, but its end could not be announced; repeating it is safe. */
export const FENCE_UNCONFIRMED_MESSAGE =
  'The change was made but could not be confirmed to every instance (the shared counter store is unreachable); repeat it with exponential backoff to confirm';

/** One unit of work's (or one outer call's) set of organisations being changed. */
class Change {
  readonly id: string;
  private readonly begun = new Set<string>();

  constructor(private readonly options: FenceOptions) {
    this.id = options.random.uuid();
  }

  /** Before the first credential write of `organisationId` in this change. */
  async begin(organisationId: string): Promise<void> {
    if (this.begun.has(organisationId)) return;
    const outcome = await withTimeout(() => this.options.freshness.beginChange(organisationId, this.id), this.options.timeoutMs);
    if (outcome.kind === 'value') {
      this.begun.add(organisationId);
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
    throw new UnavailableError(FENCE_UNAVAILABLE_MESSAGE, { cause: outcome.kind === 'error' ? outcome.error : undefined });
  }

  /** After the commit (or the rollback): true when every begun organisation was ended. */
  async end(): Promise<boolean> {
    let ok = true;
    for (const organisationId of this.begun) {
      let ended = false;
      let reason = '';
      for (let attempt = 0; attempt < END_ATTEMPTS && !ended; attempt++) {
        if (attempt > 0) await new Promise((r) => setTimeout(r, END_RETRY_DELAY_MS));
        const outcome = await withTimeout(() => this.options.freshness.endChange(organisationId, this.id), this.options.timeoutMs);
        ended = outcome.kind === 'value';
        if (!ended) reason = outcome.kind === 'error' ? describe(outcome.error) : `no answer within ${this.options.timeoutMs} ms`;
      }
      if (!ended) {
        ok = false;
        warn(this.options, reason, 'credential change committed but its end could not be announced; caches bypass the organisation until its marker expires');
      }
    }
    return ok;
  }

  get empty(): boolean {
    return this.begun.size === 0;
  }
}

type Around = (organisationId: string, call: () => Promise<unknown>) => Promise<unknown>;

/**
 * `stores` with every CREDENTIAL_WRITES method called through `around` (its first argument is the
 * organisation id); every other method is the store's own, bound once here (stores may keep
 * private fields, so `this` must stay the store).
 */
function wrapCredentialWrites(stores: Stores, around: Around): Stores {
  const out: Record<string, unknown> = { ...stores };
  for (const [name, methods] of Object.entries(CREDENTIAL_WRITES) as [keyof Stores, readonly string[]][]) {
    const store = stores[name] as unknown as Record<string, unknown>;
    const wrapped: Record<string, unknown> = {};
    for (const key of allMethodNames(store)) {
      const fn = store[key];
      if (typeof fn !== 'function') continue;
      const bound = (fn as (...args: unknown[]) => unknown).bind(store);
      wrapped[key] = methods.includes(key)
        ? (organisationId: string, ...rest: unknown[]) => around(organisationId, () => Promise.resolve(bound(organisationId, ...rest)))
        : bound;
    }
    out[name] = wrapped;
  }
  return out as unknown as Stores;
}

function allMethodNames(object: object): string[] {
  const names = new Set<string>();
  for (let o: object | null = object; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o) as object | null) {
    for (const n of Object.getOwnPropertyNames(o)) if (n !== 'constructor') names.add(n);
  }
  return [...names];
}

/** A unit of work whose credential writes are fenced (see the module comment). */
export class FencedUnitOfWork implements UnitOfWork {
  constructor(
    private readonly inner: UnitOfWork,
    private readonly options: FenceOptions,
  ) {}

  async run<T>(work: (stores: Stores) => Promise<T>): Promise<T> {
    const change = new Change(this.options);
    let result: T;
    try {
      result = await this.inner.run((stores) =>
        work(
          wrapCredentialWrites(stores, async (organisationId, call) => {
            await change.begin(organisationId);
            return call();
          }),
        ),
      );
    } catch (error) {
      if (!change.empty) await change.end();
      throw error;
    }
    if (!change.empty && !(await change.end()) && this.options.strict) throw new UnavailableError(FENCE_UNCONFIRMED_MESSAGE);
    return result;
  }
}

/**
 * The outer stores (each call its own transaction) with the same fence: a credential write called
 * outside a unit of work is begun before and ended after its own call.
 */
export function fenceOuterStores(stores: Stores, options: FenceOptions): Stores {
  return wrapCredentialWrites(stores, async (organisationId, call) => {
    const change = new Change(options);
    let result: unknown;
    try {
      await change.begin(organisationId);
      result = await call();
    } catch (error) {
      await change.end();
      throw error;
    }
    if (!(await change.end()) && options.strict) throw new UnavailableError(FENCE_UNCONFIRMED_MESSAGE);
    return result;
  });
}

function describe(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}
