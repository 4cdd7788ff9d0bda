/**
 * Key lineage (C-61, C-100): `created_by_key_id` names the key that issued or rolled a key. These
 * walks are the only ones over it: the exposure of a leaked key (secret-scanning.ts) and
 * `cos-admin key list --created-by` both read a key's descendants here.
 *
 * The walk follows the links in every organisation (a platform key issues keys in other
 * organisations, and those keys issue keys of their own), breadth first, one indexed store query
 * per key visited (ApiKeyStore.listCreatedBy), through keys of any state (a revoked key still links
 * the keys it made), and visits each key once.
 */
import { keyStatus, type ApiKey } from '../domain/api-key.js';
import type { ApiKeyStore } from '../ports/api-key-store.js';

/** What the walk reads: inside a unit of work or outside it. */
export interface LineageReads {
  readonly apiKeys: Pick<ApiKeyStore, 'listCreatedBy'>;
}

/**
 * The keys `keyId` issued or rolled, in any state and any organisation: its children, or with
 * `transitive` every descendant, in the order found (breadth first; each level by creation).
 */
export async function keysCreatedBy(stores: LineageReads, keyId: string, options: { readonly transitive: boolean }): Promise<ApiKey[]> {
  const seen = new Set<string>([keyId]);
  const found: ApiKey[] = [];
  let level: string[] = [keyId];
  while (level.length > 0) {
    const next: string[] = [];
    for (const parent of level) {
      for (const child of await stores.apiKeys.listCreatedBy(parent)) {
        if (seen.has(child.id)) continue;
        seen.add(child.id);
        next.push(child.id);
        found.push(child);
      }
    }
    level = options.transitive ? next : [];
  }
  return found;
}

/** The descendants of `keyId` (transitive, any organisation) that are active at `now`, breadth first. */
export async function activeDescendants(stores: LineageReads, keyId: string, now: Date): Promise<ApiKey[]> {
  return (await keysCreatedBy(stores, keyId, { transitive: true })).filter((k) => keyStatus(k, now) === 'active');
}
