/**
 * The organisation an Authenticator read together with a key (one store query, C-36), kept next to
 * the KeyPrincipal it produced so that the same request's GET /organisations/{own id} does not read
 * it again. The link is a WeakMap entry, so KeyPrincipal keeps its public shape (deep equality,
 * JSON) and the entry goes away with the principal.
 *
 * Freshness: an entry is used at most once, and only if no organisation was written through any
 * core of this process since the authentication (the write epoch below); otherwise the use case
 * reads the store as before. Within one request this is the record the request was authenticated
 * against, so the answer is the one a store read at that instant would have given.
 */
import type { Organisation } from '../domain/organisation.js';
import type { KeyPrincipal } from '../domain/principal.js';

interface Entry {
  readonly organisation: Organisation;
  readonly epoch: number;
}

const byPrincipal = new WeakMap<KeyPrincipal, Entry>();
let writeEpoch = 0;

/** Called by the Authenticator with the organisation read alongside the key. */
export function rememberAuthenticatedOrganisation(principal: KeyPrincipal, organisation: Organisation): void {
  byPrincipal.set(principal, { organisation, epoch: writeEpoch });
}

/** Called after any write of an organisation: every remembered record may be stale from now on. */
export function organisationsWritten(): void {
  writeEpoch++;
}

/**
 * The organisation `id` as read when `principal` was authenticated, or undefined (not remembered,
 * another organisation, already used, or an organisation was written since). Consumes the entry.
 */
export function takeAuthenticatedOrganisation(principal: object, id: string): Organisation | undefined {
  const entry = byPrincipal.get(principal as KeyPrincipal);
  if (entry === undefined) return undefined;
  byPrincipal.delete(principal as KeyPrincipal);
  return entry.epoch === writeEpoch && entry.organisation.id === id ? entry.organisation : undefined;
}
