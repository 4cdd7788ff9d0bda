import { KEY_LENGTH, digestKey, digestsEqual, isWellFormedKey, keyStatus } from '../domain/api-key.js';
import { UnauthorizedError } from '../domain/errors.js';
import type { KeyPrincipal } from '../domain/principal.js';
import { noopMetrics } from '../defaults.js';
import type { AuthFailureReason, Metrics } from '../ports/metrics.js';
import { rememberAuthenticatedOrganisation } from './authenticated-organisation.js';
import type { CoreDeps } from './deps.js';
import type { KeyUsage } from './key-usage.js';

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
 * without touching the store. A well-formed key is digested and looked up in one query; unknown,
 * revoked or expired keys are UnauthorizedError. No cache: a revoked key fails on the next request.
 * Each refusal is counted by its reason (Metrics.authFailure), which never carries key material.
 */
export class Authenticator {
  private readonly metrics: Metrics;

  constructor(
    private readonly deps: Pick<CoreDeps, 'stores' | 'clock'> & Partial<Pick<CoreDeps, 'metrics'>>,
    /** Told of every successful authentication (last_used_at, written in batches); never of a failed one. */
    private readonly usage: Pick<KeyUsage, 'record'> | null = null,
  ) {
    this.metrics = deps.metrics ?? noopMetrics;
  }

  async authenticate(authorization: string | undefined): Promise<KeyPrincipal> {
    const raw = parseAuthorization(authorization);
    if (raw === null) throw this.refused(authorization === undefined || authorization === '' ? 'missing' : 'malformed');
    const digest = digestKey(raw);
    const credential = await this.deps.stores.apiKeys.findCredential(digest);
    if (credential === null || !digestsEqual(credential.key.digest, digest)) throw this.refused('unknown_key');
    const { key, organisation } = credential;
    const now = this.deps.clock.now();
    const status = keyStatus(key, now);
    if (status !== 'active') throw this.refused(status);
    this.usage?.record(key.id, now);
    const principal: KeyPrincipal = {
      kind: 'api_key',
      keyId: key.id,
      keyPrefix: key.keyPrefix,
      organisationId: key.organisationId,
      isPlatform: organisation.isSystem,
    };
    // The same request's GET of its own organisation reuses this read (authenticated-organisation.ts).
    if (organisation.id === key.organisationId) rememberAuthenticatedOrganisation(principal, organisation);
    return principal;
  }

  private refused(reason: AuthFailureReason): UnauthorizedError {
    this.metrics.authFailure(reason);
    return new UnauthorizedError();
  }
}
