import type { ApiKey } from '../domain/api-key.js';
import type { Principal } from '../domain/principal.js';
import type { CoreDeps } from './deps.js';
import type { Page } from './page.js';

/** The issuance result: the only place the raw key ever appears (spec §5.6, C-22). */
export interface IssuedKey {
  readonly key: ApiKey;
  readonly rawKey: string;
}

/** API key lifecycle: issue -> active -> revoked | expired (spec §3). */
export class ApiKeys {
  constructor(private readonly deps: CoreDeps) {}

  /** GET .../api-keys, query {limit, cursor}; 404 when the organisation does not exist. */
  list(principal: Principal, orgId: string, query: Readonly<Record<string, unknown>>): Promise<Page<ApiKey>> {
    throw new Error('TODO: implement');
  }

  /**
   * POST .../api-keys: body {label, expires_at?, environment?} (C-23); at most
   * config.maxActiveKeysPerOrg active keys (C-25, 409); audit api_key_issued in the same unit of work.
   */
  issue(principal: Principal, orgId: string, body: unknown): Promise<IssuedKey> {
    throw new Error('TODO: implement');
  }

  /** GET .../api-keys/{key_id}: a key id not in the named organisation is 404 (C-34). */
  get(principal: Principal, orgId: string, keyId: string): Promise<ApiKey> {
    throw new Error('TODO: implement');
  }

  /**
   * DELETE .../api-keys/{key_id}: idempotent (C-35); the revocation and its api_key_revoked audit
   * entry commit in one unit of work (C-40); a second DELETE writes no second entry.
   */
  revoke(principal: Principal, orgId: string, keyId: string): Promise<void> {
    throw new Error('TODO: implement');
  }
}
