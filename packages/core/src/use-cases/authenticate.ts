import type { KeyPrincipal } from '../domain/principal.js';
import type { CoreDeps } from './deps.js';

/**
 * Authentication (spec §5, C-32, C-36). `Authorization` must be exactly `Bearer <key>` (scheme
 * case-insensitive, one space, key matching KEY_PATTERN); anything else is UnauthorizedError
 * without touching the store. A well-formed key is digested and looked up in one query; unknown,
 * revoked or expired keys are UnauthorizedError. No cache: a revoked key fails on the next request.
 */
export class Authenticator {
  constructor(private readonly deps: Pick<CoreDeps, 'stores' | 'clock'>) {}

  authenticate(authorization: string | undefined): Promise<KeyPrincipal> {
    throw new Error('TODO: implement');
  }
}
