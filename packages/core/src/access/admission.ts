/**
 * Admission (spec §5, §8; C-32, C-33, C-36, C-50): the one module that decides whether a request
 * with an `Authorization` header gets in, and counts it exactly once. In order:
 *
 * 1. parse the bearer key (`Bearer <key>`, scheme case-insensitive, one space, a well-formed key);
 *    anything else is refused without touching the store;
 * 2. look the credential up ONCE: through the credential cache when the core has one (a
 *    read-through in front of ApiKeyStore.findCredential, credential-cache.ts, which counts in
 *    its round trip as admission plans it), else the store;
 * 3. one status check (statusOf: unknown, revoked, expired or active);
 * 4. the principal (principalOf);
 * 5. the rate decision: an admitted request against its organisation, under the limit of the
 *    organisation record read with the key, and against its key's own window when the key has a
 *    limit of its own (C-292: the key's window first, in the same step; counted in the cache's
 *    round trip when the cache confirmed or filled it, else by the rate limiter), a refused one
 *    against its source address (C-50: key guessing is throttled; over that limit the answer is
 *    429 instead of 401).
 *
 * The caller gets one answer, `{ admitted, principal, organisation, decision }` or `{ admitted:
 * false, decision, refusal }`, and answers 429 whenever `decision.allowed` is false (C-33: a key that
 * does not authenticate is never 429 for its organisation's limit). Each refusal is counted by its
 * reason (Metrics.authFailure), which never carries key material; each admitted key is recorded as
 * used (last_used_at, written in batches by KeyUsage).
 *
 * The Authenticator is the embedders' step (`authenticate()`, then `rateLimiter.enforce`): steps 1-4
 * against the store, nothing counted. Both run steps 1-3 through one private lookup (lookUp below),
 * so the sequence and its refusals are written once.
 *
 * `inspect()` is steps 2-5 for a token another service was given (introspection.ts, C-272): the
 * same lookup and status check, counted against the token's organisation only when asked. An
 * introspecting caller is admitted by `admit(…, 'introspection')`: its request counts against its
 * organisation's introspection ceiling instead of the organisation's own limit (C-271).
 */
import { KEY_LENGTH, digestKey, digestsEqual, isWellFormedKey, keyStatus, scopesOf, type KeyStatus } from '../domain/api-key.js';
import { UnauthorizedError } from '../domain/errors.js';
import type { Organisation } from '../domain/organisation.js';
import type { UsageOutcome } from '../domain/usage.js';
import type { KeyPrincipal } from '../domain/principal.js';
import { windowAt, type RateDecision, type RateWindow } from '../domain/rate-window.js';
import { noopMetrics } from '../defaults.js';
import type { Credential } from '../ports/api-key-store.js';
import type { AuthFailureReason, Metrics } from '../ports/metrics.js';
import type { CountAs, CredentialCache, CredentialRead } from './credential-cache.js';
import type { CoreDeps } from '../deps.js';
import type { KeyScope, OrganisationScope, RateLimiter, RateScope } from './rate-limit.js';

/** A request let in: who it is, its organisation as read with the key, and its organisation's decision. */
export interface Admitted {
  readonly admitted: true;
  readonly principal: KeyPrincipal;
  /**
   * The organisation record read together with the key (one store query, or a credential-cache
   * entry the shared counter store confirmed fresh in this call; C-36). Within the same request it
   * is what a store read would answer: pass it to `Organisations.get` (its
   * `authenticatedOrganisation` option) so that a GET of the caller's own organisation is not read
   * twice.
   */
  readonly organisation: Organisation;
  /** The request counted against its organisation: not allowed means 429 (C-51). */
  readonly decision: RateDecision;
  /**
   * The introspected token's lookup, started alongside this request's own (C-274): only when
   * admit() was given a token to look up ahead and the caller's key is a known introspector.
   */
  readonly lookAhead?: LookAhead;
}

/** An introspected token's lookup begun with its caller's admission (C-274): nothing counted. */
export interface LookAhead {
  /** The token, as the introspection body's reading gives it (well-formed). */
  readonly token: string;
  /** inspect(token, false), begun in the caller's turn. */
  readonly inspection: Promise<Inspection>;
}

/** A request whose key does not authenticate (401), counted against its source address. */
export interface Refused {
  readonly admitted: false;
  /** The source address scope's decision: not allowed means 429 instead of the 401 (C-50). */
  readonly decision: RateDecision;
  /** The 401 to answer when the decision allows it. */
  readonly refusal: UnauthorizedError;
}

export type AdmissionResult = Admitted | Refused;

/**
 * What an admitted request counts against: its organisation's limit (every route), or its
 * organisation's introspection ceiling (POST /v1/introspect, C-271).
 */
export type AdmissionCount = CountAs;

/** A token as a direct request with it would find it (inspect()). */
export type Inspection =
  | { readonly active: false }
  | {
      readonly active: true;
      readonly credential: Credential;
      readonly principal: KeyPrincipal;
      /** The request counted against the token's organisation; null when it was not to be counted. */
      readonly decision: RateDecision | null;
    };

const INACTIVE: Inspection = Object.freeze({ active: false });

/** Keys admitted to introspect whose digests are remembered (C-274): a platform has a few gateways. */
export const KNOWN_INTROSPECTORS_MAX = 100;
const INTROSPECT_SCOPE = 'keys:introspect';
const ignore = (): void => {};

const SCHEME = 'bearer';
/** "Bearer" + one space + the key: the only header length that can be valid. */
const HEADER_LENGTH = SCHEME.length + 1 + KEY_LENGTH;

/**
 * The raw key of an `Authorization` value, or null when it is not exactly `Bearer <key>`
 * (scheme case-insensitive, one space, a well-formed key). Length is checked first so that
 * arbitrary input costs nothing.
 */
export function parseAuthorization(authorization: unknown): string | null {
  if (typeof authorization !== 'string' || authorization.length !== HEADER_LENGTH) return null;
  if (authorization.slice(0, SCHEME.length).toLowerCase() !== SCHEME) return null;
  if (authorization[SCHEME.length] !== ' ') return null;
  const raw = authorization.slice(SCHEME.length + 1);
  return isWellFormedKey(raw) ? raw : null;
}

/** Why a credential does not authenticate, or 'active'. The one status check of admission. */
export function statusOf(credential: Credential | null, digest: string, now: Date): 'unknown_key' | KeyStatus {
  if (credential === null || !digestsEqual(credential.key.digest, digest)) return 'unknown_key';
  return keyStatus(credential.key, now);
}

/** The principal an active credential authenticates as. */
export function principalOf(credential: Credential): KeyPrincipal {
  const { key, organisation } = credential;
  return {
    kind: 'api_key',
    keyId: key.id,
    keyPrefix: key.keyPrefix,
    organisationId: key.organisationId,
    isPlatform: organisation.isSystem,
    scopes: scopesOf(key),
    allowedCidrs: key.allowedCidrs ?? null,
  };
}

/** Told of every key that authenticates (KeyUsage: last_used_at, written in batches), never of a refused one. */
export interface KeyUseRecorder {
  record(keyId: string, at: Date, outcome?: UsageOutcome): void;
}

type LookupDeps = Pick<CoreDeps, 'stores' | 'clock'> & Partial<Pick<CoreDeps, 'metrics'>>;

/** The lookup's answer: what `read` answered for an active credential, and the instant it was checked at; or the 401 to answer. */
type Lookup<R> =
  | { readonly active: true; readonly credential: Credential; readonly now: Date; readonly read: R }
  | { readonly active: false; readonly refusal: UnauthorizedError };

/**
 * The one lookup sequence of both the Authenticator and Admission: parse the header, read the
 * credential of its digest once (`read`: the store, or the credential cache), check its status, and
 * refuse (counted by reason in Metrics.authFailure, no key material) whatever is not active.
 */
async function lookUp<R extends { readonly credential: Credential | null }>(
  deps: LookupDeps,
  metrics: Metrics,
  authorization: string | undefined,
  read: (digest: string, now: Date) => Promise<R>,
): Promise<Lookup<R>> {
  const raw = parseAuthorization(authorization);
  if (raw === null) return refused(metrics, authorization === undefined || authorization === '' ? 'missing' : 'malformed');
  const digest = digestKey(raw);
  const now = deps.clock.now();
  const answer = await read(digest, now);
  const credential = answer.credential;
  const status = statusOf(credential, digest, now);
  if (status !== 'active' || credential === null) return refused(metrics, status === 'active' ? 'unknown_key' : status);
  return { active: true, credential, now, read: answer };
}

function refused(metrics: Metrics, reason: AuthFailureReason): { readonly active: false; readonly refusal: UnauthorizedError } {
  metrics.authFailure(reason);
  return { active: false, refusal: new UnauthorizedError() };
}

export interface AuthenticatorParts {
  /** Told of every authenticated key (last_used_at); never of a refused one. */
  readonly usage?: KeyUseRecorder | null;
}

/**
 * The embedders' step (authenticate, then `rateLimiter.enforce`, C-33): the caller's principal, read
 * from the store, nothing counted.
 */
export class Authenticator {
  private readonly metrics: Metrics;
  private readonly usage: KeyUseRecorder | null;

  constructor(
    private readonly deps: Pick<CoreDeps, 'stores' | 'clock'> & Partial<Pick<CoreDeps, 'metrics'>>,
    parts: AuthenticatorParts = {},
  ) {
    this.metrics = deps.metrics ?? noopMetrics;
    this.usage = parts.usage ?? null;
  }

  /** The principal of the key `authorization` carries; UnauthorizedError for a key that does not authenticate. */
  async authenticate(authorization: string | undefined): Promise<KeyPrincipal> {
    const found = await lookUp(this.deps, this.metrics, authorization, async (digest) => ({ credential: await this.deps.stores.apiKeys.findCredential(digest) }));
    if (!found.active) throw found.refusal;
    this.usage?.record(found.credential.key.id, found.now);
    return principalOf(found.credential);
  }
}

export interface AdmissionParts {
  /** Counts admitted requests (organisation) and refused ones (source address). */
  readonly limiter: RateLimiter;
  /** Told of every admitted key (last_used_at); never of a refused one. */
  readonly usage?: KeyUseRecorder | null;
  /** The credential cache (production with Redis); null: every lookup reads the store. */
  readonly cache?: CredentialCache | null;
}

/** What admission's lookup read: the credential, what the cache counted with it, and the window it counted in (null: the store was read). */
interface AdmissionRead extends CredentialRead {
  readonly window: RateWindow | null;
}

/** The HTTP hot path: admission of a request, counted exactly once (see the module comment). */
export class Admission {
  private readonly metrics: Metrics;
  private readonly limiter: RateLimiter;
  private readonly usage: KeyUseRecorder | null;
  private readonly cache: CredentialCache | null;
  /**
   * Digests of the keys last admitted to introspect (C-274), oldest first: only their requests may
   * start an introspected token's lookup before they are admitted.
   */
  private readonly introspectors = new Set<string>();

  constructor(
    private readonly deps: Pick<CoreDeps, 'stores' | 'clock'> & Partial<Pick<CoreDeps, 'metrics'>>,
    parts: AdmissionParts,
  ) {
    this.metrics = deps.metrics ?? noopMetrics;
    this.limiter = parts.limiter;
    this.usage = parts.usage ?? null;
    this.cache = parts.cache ?? null;
  }

  /**
   * Admits or refuses the request carrying `authorization`, coming from `sourceAddress` (or a
   * function answering it, called only for a refused key: an admitted request needs no address),
   * and counts it exactly once (see the module comment). Never throws for a bad key; a failing
   * store rejects (503), and a failing counter fails open (C-54). `counts`: what an admitted request
   * is counted against (AdmissionCount).
   *
   * `tokenAhead` (an introspection, C-274): called, in the same turn as the caller's own lookup,
   * only when the caller's key was admitted to introspect before (its digest is among the last
   * KNOWN_INTROSPECTORS_MAX such); the token it answers (null: none) is then inspected without
   * counting, and an admitted answer carries that inspection as `lookAhead`. A refused answer never
   * waits for it.
   */
  async admit(
    authorization: string | undefined,
    sourceAddress: string | (() => string),
    counts: AdmissionCount = 'organisation',
    tokenAhead?: () => string | null,
  ): Promise<AdmissionResult> {
    let lookAhead: LookAhead | undefined;
    let callerDigest: string | undefined;
    const found = await lookUp(
      this.deps,
      this.metrics,
      authorization,
      tokenAhead === undefined
        ? (digest, now) => this.read(digest, now, counts)
        : (digest, now) => {
            const read = this.read(digest, now, counts);
            callerDigest = digest;
            const token = this.introspectors.has(digest) ? tokenAhead() : null;
            if (token !== null) {
              const inspection = this.inspect(token, false);
              inspection.catch(ignore); // awaited only if the caller is admitted
              lookAhead = { token, inspection };
            }
            return read;
          },
    );
    if (callerDigest !== undefined) this.rememberIntrospector(callerDigest, found.active ? found.credential : null);
    if (!found.active) {
      const address = typeof sourceAddress === 'string' ? sourceAddress : sourceAddress();
      return { admitted: false, decision: await this.limiter.check({ kind: 'source', address }), refusal: found.refusal };
    }
    const { credential, now, read } = found;
    let decision = this.decide(credential, now, read, counts);
    if (decision instanceof Promise) decision = await decision;
    this.usage?.record(credential.key.id, now, decision.allowed ? 'answered' : 'rate_limited');
    const principal = principalOf(credential);
    return lookAhead === undefined
      ? { admitted: true, principal, organisation: credential.organisation, decision }
      : { admitted: true, principal, organisation: credential.organisation, decision, lookAhead };
  }

  /**
   * Keeps or forgets the digest of a key that asked to introspect (C-274), given its active
   * credential or null: kept while it authenticates and holds `keys:introspect` (a key's scopes never
   * change), forgotten at its first refusal. When full, the key remembered first goes.
   */
  private rememberIntrospector(digest: string, credential: Credential | null): void {
    const introspectors = this.introspectors;
    if (credential === null) introspectors.delete(digest);
    else if (!introspectors.has(digest) && scopesOf(credential.key).includes(INTROSPECT_SCOPE)) {
      if (introspectors.size >= KNOWN_INTROSPECTORS_MAX) introspectors.delete(introspectors.values().next().value as string);
      introspectors.add(digest);
    }
  }

  /**
   * A token presented to another service (C-272): digested and read whatever it is (a string that
   * is not even a key's shape is looked up as well, so the answer's timing does not tell a malformed
   * token from an unknown one), checked as admit() checks a key, and with `count` counted against its
   * organisation and recorded as used exactly as a direct request would be (an organisation over its
   * limit gives a decision that is not allowed; the token stays active). Nothing is counted for a
   * token that is not active, nor against any source address.
   */
  async inspect(token: string, count: boolean): Promise<Inspection> {
    const now = this.deps.clock.now();
    const digest = digestKey(token);
    const read = await this.read(digest, now, count ? 'organisation' : null);
    const credential = read.credential;
    if (credential === null || statusOf(credential, digest, now) !== 'active') return INACTIVE;
    if (!count) return { active: true, credential, principal: principalOf(credential), decision: null };
    let decision = this.decide(credential, now, read, 'organisation');
    if (decision instanceof Promise) decision = await decision;
    this.usage?.record(credential.key.id, now, decision.allowed ? 'answered' : 'rate_limited');
    return { active: true, credential, principal: principalOf(credential), decision };
  }

  /**
   * The one read of a digest: the store, or the credential cache, which reads the store on a miss
   * and counts in its round trip as planned here: only a valid key, against the counter `count` (the
   * organisation's limit or its introspection ceiling), and nothing for a counter known over its
   * limit or when `count` is null (the cache still confirms a cached copy, so the answer is as fresh).
   */
  private async read(digest: string, now: Date, count: CountAs | null): Promise<AdmissionRead> {
    const cache = this.cache;
    if (cache === null) return { credential: await this.deps.stores.apiKeys.findCredential(digest), counted: null, window: null };
    const limiter = this.limiter;
    const window = windowAt(now.getTime());
    const read = await cache.find(
      digest,
      window,
      (credential) => {
        if (statusOf(credential, digest, now) !== 'active') return 'refuse';
        if (count === null || limiter.isBlocked(countedScope(count, credential.organisation), window.startMs)) return 'confirm';
        const key = count === 'organisation' ? keyScopeOf(credential) : null;
        return key === null || !limiter.isBlocked(key, window.startMs) ? 'count' : 'confirm';
      },
      count ?? 'organisation',
    );
    return { credential: read.credential, counted: read.counted, keyCount: read.keyCount, window };
  }

  /** The decision of the counter `count` for an active credential: counted in the read's round trip, or by the limiter now. */
  private decide(credential: Credential, now: Date, read: AdmissionRead, count: CountAs): RateDecision | Promise<RateDecision> {
    if (count === 'organisation' && credential.key.rateLimitPerMinute != null) return this.decidePair(credential, now, read);
    const scope = countedScope(count, credential.organisation);
    return read.counted !== null && read.window !== null ? this.limiter.conclude(scope, read.window, read.counted) : this.limiter.checkAt(scope, now.getTime());
  }

  /** decide() for a key with a limit of its own (C-292): its window and its organisation's. */
  private decidePair(credential: Credential, now: Date, read: AdmissionRead): RateDecision | Promise<RateDecision> {
    const organisation = organisationScope(credential.organisation);
    const key = keyScopeOf(credential)!;
    return read.counted !== null && read.window !== null
      ? this.limiter.concludePair(organisation, key, read.window, read.counted, read.keyCount)
      : this.limiter.checkPairAt(organisation, key, now.getTime());
  }
}

/** The organisation's own limit scope (C-240). */
function organisationScope(organisation: Organisation): OrganisationScope {
  return { kind: 'organisation', organisationId: organisation.id, limitPerMinute: organisation.rateLimitPerMinute };
}

/** The key's own window (C-290), or null when the key has no limit of its own. */
function keyScopeOf(credential: Credential): KeyScope | null {
  const limit = credential.key.rateLimitPerMinute;
  return limit == null ? null : { kind: 'key', organisationId: credential.key.organisationId, keyId: credential.key.id, limitPerMinute: limit };
}

/** The organisation's counter `count` as a rate scope: its limit read with its record (C-240), or its introspection ceiling (C-271). */
function countedScope(count: CountAs, organisation: Organisation): RateScope {
  return count === 'organisation' ? organisationScope(organisation) : { kind: 'introspection', organisationId: organisation.id };
}
