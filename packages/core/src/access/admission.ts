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
 * 5. the rate decision: an admitted request against its organisation (counted in the cache's
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
 * `authenticate()` is the embedders' step (authenticate, then `rateLimiter.enforce`): steps 1-4
 * against the store, nothing counted.
 */
import { KEY_LENGTH, digestKey, digestsEqual, isWellFormedKey, keyStatus, scopesOf, type KeyStatus } from '../domain/api-key.js';
import { UnauthorizedError } from '../domain/errors.js';
import type { Organisation } from '../domain/organisation.js';
import type { KeyPrincipal } from '../domain/principal.js';
import { windowAt, type RateDecision, type RateWindow } from '../domain/rate-window.js';
import { noopMetrics } from '../defaults.js';
import type { Credential } from '../ports/api-key-store.js';
import type { AuthFailureReason, Metrics } from '../ports/metrics.js';
import type { CredentialCache, CredentialRead } from './credential-cache.js';
import type { CoreDeps } from '../deps.js';
import type { KeyUsage } from '../workers/key-usage.js';
import type { RateLimiter, RateScope } from './rate-limit.js';

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
  };
}

export interface AdmissionParts {
  /** Counts admitted requests (organisation) and refused ones (source address). Required by admit(). */
  readonly limiter?: RateLimiter;
  /** Told of every admitted key (last_used_at); never of a refused one. */
  readonly usage?: Pick<KeyUsage, 'record'> | null;
  /** The credential cache (production with Redis); null: every lookup reads the store. */
  readonly cache?: CredentialCache | null;
}

export class Admission {
  private readonly metrics: Metrics;
  private readonly limiter: RateLimiter | null;
  private readonly usage: Pick<KeyUsage, 'record'> | null;
  private readonly cache: CredentialCache | null;

  constructor(
    private readonly deps: Pick<CoreDeps, 'stores' | 'clock'> & Partial<Pick<CoreDeps, 'metrics'>>,
    parts: AdmissionParts = {},
  ) {
    this.metrics = deps.metrics ?? noopMetrics;
    this.limiter = parts.limiter ?? null;
    this.usage = parts.usage ?? null;
    this.cache = parts.cache ?? null;
  }

  /**
   * The HTTP hot path: admits or refuses the request carrying `authorization`, coming from
   * `sourceAddress` (or a function answering it, called only for a refused key: an admitted
   * request needs no address), and counts it exactly once (see the module comment). Never throws
   * for a bad key; a failing store rejects (503), and a failing counter fails open (C-54).
   */
  async admit(authorization: string | undefined, sourceAddress: string | (() => string)): Promise<AdmissionResult> {
    const limiter = this.limiter;
    if (limiter === null) throw new Error('admit() needs the rate limiter (AdmissionParts.limiter)');
    const raw = parseAuthorization(authorization);
    if (raw === null) return this.refuse(limiter, authorization === undefined || authorization === '' ? 'missing' : 'malformed', sourceAddress);
    const digest = digestKey(raw);
    const now = this.deps.clock.now();
    // The one lookup: the store, or the cache (which reads the store on a miss and counts in its
    // round trip as planned here: only a valid key, and nothing for an organisation known over its limit).
    let credential: Credential | null;
    let counted: CredentialRead['counted'] = null;
    let window: RateWindow | null = null;
    const cache = this.cache;
    if (cache === null) {
      credential = await this.deps.stores.apiKeys.findCredential(digest);
    } else {
      const at = (window = windowAt(now.getTime()));
      ({ credential, counted } = await cache.find(digest, at, (found) => {
        if (statusOf(found, digest, now) !== 'active') return 'refuse';
        return limiter.isBlocked(organisationScope(found.key.organisationId), at.startMs) ? 'confirm' : 'count';
      }));
    }
    const status = statusOf(credential, digest, now);
    if (status !== 'active' || credential === null) return this.refuse(limiter, status === 'active' ? 'unknown_key' : status, sourceAddress);
    const scope = organisationScope(credential.key.organisationId);
    let decision: RateDecision | Promise<RateDecision> = counted !== null && window !== null ? limiter.conclude(scope, window, counted) : limiter.checkAt(scope, now.getTime());
    if (decision instanceof Promise) decision = await decision;
    this.usage?.record(credential.key.id, now, decision.allowed ? 'answered' : 'rate_limited');
    return { admitted: true, principal: principalOf(credential), organisation: credential.organisation, decision };
  }

  /**
   * The caller's principal (embedders: authenticate, then `rateLimiter.enforce`, C-33); read from
   * the store, nothing counted. UnauthorizedError for a key that does not authenticate.
   */
  async authenticate(authorization: string | undefined): Promise<KeyPrincipal> {
    const raw = parseAuthorization(authorization);
    if (raw === null) throw this.refused(authorization === undefined || authorization === '' ? 'missing' : 'malformed');
    const digest = digestKey(raw);
    const credential = await this.deps.stores.apiKeys.findCredential(digest);
    const now = this.deps.clock.now();
    const status = statusOf(credential, digest, now);
    if (status !== 'active' || credential === null) throw this.refused(status === 'active' ? 'unknown_key' : status);
    this.usage?.record(credential.key.id, now);
    return principalOf(credential);
  }

  private async refuse(limiter: RateLimiter, reason: AuthFailureReason, sourceAddress: string | (() => string)): Promise<Refused> {
    const refusal = this.refused(reason);
    const address = typeof sourceAddress === 'string' ? sourceAddress : sourceAddress();
    return { admitted: false, decision: await limiter.check({ kind: 'source', address }), refusal };
  }

  private refused(reason: AuthFailureReason): UnauthorizedError {
    this.metrics.authFailure(reason);
    return new UnauthorizedError();
  }
}

function organisationScope(organisationId: string): RateScope {
  return { kind: 'organisation', organisationId };
}
