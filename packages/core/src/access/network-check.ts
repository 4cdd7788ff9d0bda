/**
 * The per-key network check of an admitted request (C-263): a key restricted to networks answers
 * 403 for a request from any other address. It runs after admission's rate decision (the request
 * has been counted, and 401 and 429 come first) and before any scope check. The source address is
 * asked for only when the key is restricted, so an unrestricted key costs one property read.
 */
import { ForbiddenError } from '../domain/errors.js';
import { addressAllowed } from '../domain/key-network.js';
import type { KeyPrincipal } from '../domain/principal.js';

export const NETWORK_REFUSED_MESSAGE = 'This API key may not be used from this address';
export const ISSUE_SOURCE_ADDRESS = 'not allowed for this key';

/** The 403 for a request of `principal` from `sourceAddress`, or null when its key allows the address. */
export function networkRefusal(principal: Pick<KeyPrincipal, 'allowedCidrs'>, sourceAddress: string | (() => string)): ForbiddenError | null {
  if (principal.allowedCidrs === undefined || principal.allowedCidrs === null) return null;
  const address = typeof sourceAddress === 'string' ? sourceAddress : sourceAddress();
  if (addressAllowed(principal, address)) return null;
  return new ForbiddenError(NETWORK_REFUSED_MESSAGE, [{ field: 'source_address', issue: ISSUE_SOURCE_ADDRESS }]);
}
