import type { ApiKey } from '../domain/api-key.js';
import type { Organisation } from '../domain/organisation.js';
import type { PageRequest } from './pagination.js';

/** What authentication needs, fetched in one indexed query (the hot path). */
export interface Credential {
  readonly key: ApiKey;
  readonly organisation: Organisation;
}

export interface ApiKeyStore {
  /** Inserts; a duplicate digest throws ConflictError. */
  insert(key: ApiKey): Promise<void>;
  /** The key with that id inside that organisation, or null (also null when it belongs to another). */
  findById(organisationId: string, keyId: string): Promise<ApiKey | null>;
  /** The key with that digest together with its organisation, or null. */
  findCredential(digest: string): Promise<Credential | null>;
  /** Keys of one organisation ordered by (createdAt, id), strictly after `page.after`, at most `page.limit`. */
  list(organisationId: string, page: PageRequest): Promise<ApiKey[]>;
  /** Keys neither revoked nor expired at `now`. */
  countActive(organisationId: string, now: Date): Promise<number>;
  /**
   * Sets revokedAt if the key is not yet revoked. Returns true when this call revoked it,
   * false when it was already revoked or does not exist in that organisation.
   */
  revoke(organisationId: string, keyId: string, at: Date): Promise<boolean>;
  /**
   * Remembers that the key was reported exposed at `url` (null: no URL given). True the first time
   * for that (key, url) pair, false for a repeat (a redelivered secret-scanning alert).
   */
  recordExposure(keyId: string, url: string | null, at: Date): Promise<boolean>;
}
