import { KEY_LENGTH, digestKey, digestsEqual, isWellFormedKey, keyStatus, scopesOf } from '../domain/api-key.js';
import { UnauthorizedError } from '../domain/errors.js';
import type { Organisation } from '../domain/organisation.js';
import type { KeyPrincipal } from '../domain/principal.js';
import type { RateDecision } from '../domain/rate-window.js';
import { noopMetrics } from '../defaults.js';
import type { Credential } from '../ports/api-key-store.js';
import type { AuthFailureReason, Metrics } from '../ports/metrics.js';
import type { CredentialCache } from './credential-cache.js';
import type { CoreDeps } from './deps.js';
import type { KeyUsage } from './key-usage.js';

/**
 * admit()'s answer: the principal, the key's organisation as this authentication read (or confirmed
 * fresh) it, and the organisation's rate decision when admit() counted the request.
 */
export interface Admitted {
  readonly principal: KeyPrincipal;
  /**
   * The organisation record read together with the key (one store query, or a credential-cache
   * entry that Redis confirmed fresh in this call; C-36). Within the same request it is what a
   * store read would answer: pass it to `Organisations.get` (its `authenticatedOrganisation`
   * option) so that a GET of the caller's own organisation is not read twice.
   */
  readonly organisation: Organisation;
  /** Set when the request was already counted against its organisation (the credential cache). */
  readonly decision?: RateDecision;
}

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

/**
 * Authentication (spec §5, C-32, C-36). `Authorization` must be exactly `Bearer <key>` (scheme
 * case-insensitive, one space, key matching KEY_PATTERN); anything else is UnauthorizedError
 * without touching the store. A well-formed key is digested and looked up together with its
 * organisation in one query (ApiKeyStore.findCredential); unknown, revoked or expired keys are
 * UnauthorizedError. The Authenticator keeps nothing itself: authenticate() asks the store every
 * time (a store may cache behind its port: store-sql does on SQLite files, checking the file for
 * changes on every read); admit() goes through the core's credential cache when the core has one
 * (credential-cache.ts: an entry is used only when Redis confirms it fresh in the call that counts
 * the request), so a revoked key fails on the next request either way (C-36, C-57). Each refusal
 * is counted by its reason (Metrics.authFailure), which never carries key material.
 */
export class Authenticator {
  private readonly metrics: Metrics;

  constructor(
    private readonly deps: Pick<CoreDeps, 'stores' | 'clock'> & Partial<Pick<CoreDeps, 'metrics'>>,
    /** Told of every successful authentication (last_used_at, written in batches); never of a failed one. */
    private readonly usage: Pick<KeyUsage, 'record'> | null = null,
    private readonly cache: CredentialCache | null = null,
  ) {
    this.metrics = deps.metrics ?? noopMetrics;
  }

  /**
   * The caller's principal (the public shape embedders use: authenticate, then rate limit, C-33).
   * admit() answers the same and also the organisation it read with the key.
   */
  async authenticate(authorization: string | undefined): Promise<KeyPrincipal> {
    return principalOf(await this.verify(authorization));
  }

  /**
   * Authentication for the HTTP hot path (C-33: 401 before 429). With the credential cache the
   * request is also counted against its organisation in the same Redis call, and `decision` is
   * that count's decision (the caller must not count it again); without it, the same as
   * authenticate() and no decision. Either way the answer carries the organisation read with the
   * key. A key that does not authenticate is UnauthorizedError and was counted nowhere (the caller
   * counts it in the source scope, C-50). A key that does is recorded as used (last_used_at),
   * cached or not.
   */
  async admit(authorization: string | undefined): Promise<Admitted> {
    if (this.cache === null) {
      const credential = await this.verify(authorization);
      return { principal: principalOf(credential), organisation: credential.organisation };
    }
    const raw = parseAuthorization(authorization);
    if (raw === null) throw this.refused(authorization === undefined || authorization === '' ? 'missing' : 'malformed');
    const admission = await this.cache.admit(digestKey(raw));
    if (typeof admission === 'string') throw this.refused(admission);
    const { credential, decision } = admission;
    this.usage?.record(credential.key.id, this.deps.clock.now());
    return { principal: principalOf(credential), organisation: credential.organisation, decision };
  }

  /** The credential of an active key, read from the store, or UnauthorizedError (counted by reason). */
  private async verify(authorization: string | undefined): Promise<Credential> {
    const raw = parseAuthorization(authorization);
    if (raw === null) throw this.refused(authorization === undefined || authorization === '' ? 'missing' : 'malformed');
    const digest = digestKey(raw);
    const credential = await this.deps.stores.apiKeys.findCredential(digest);
    if (credential === null || !digestsEqual(credential.key.digest, digest)) throw this.refused('unknown_key');
    const now = this.deps.clock.now();
    const status = keyStatus(credential.key, now);
    if (status !== 'active') throw this.refused(status);
    this.usage?.record(credential.key.id, now);
    return credential;
  }

  private refused(reason: AuthFailureReason): UnauthorizedError {
    this.metrics.authFailure(reason);
    return new UnauthorizedError();
  }
}

function principalOf(credential: Credential): KeyPrincipal {
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
