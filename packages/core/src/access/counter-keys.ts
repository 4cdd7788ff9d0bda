/**
 * The names of the shared counter store's keys (C-50, C-55; the credential freshness of C-36,
 * C-57). The core names every key; an implementation of RateCounter or CredentialFreshness uses the
 * names it is given and only puts its own namespace in front (limiter-redis: `<keyPrefix>:`), so
 * every instance, whatever its version of an adapter, counts and fences under the same names.
 *
 * - a rate-limit counter: `{<scope>}:<windowStartMs>` with the scope `org:<id>`, `unauth`,
 *   `src:<address>` or `scan` (RateLimiter's scopeKey); an organisation's introspection counter
 *   `{org:<id>}:introspect:<windowStartMs>`, in the organisation's slot, so that the call confirming
 *   an introspecting key's freshness counts it in the same round trip; a key's own window (a key
 *   with its own limit) `{org:<id>}:key:<key id>:<windowStartMs>`, in the same slot for the same reason;
 * - an organisation's freshness token and changes in progress: `{org:<id>}:cc:token`,
 *   `{org:<id>}:cc:changes` (next to its counters: one hash tag, one Redis Cluster slot);
 * - the markers of whether the store lost its data, per Redis Cluster hash slot:
 *   `{<slot tag>}:cc:alive` and `{<slot tag>}:cc:unsettled`, where the slot tag is a short tag that
 *   hashes to the organisation's slot. Nothing is global: every key an organisation's calls touch
 *   lives in its slot, so a cluster serves them from one node and a resharding moves them together.
 */

import type { FreshnessKeys } from '../ports/credential-freshness.js';

/** The counter of `scope` (a scope key, e.g. `org:<id>`) in the window starting at `windowStartMs`. */
export function counterKey(scope: string, windowStartMs: number): string {
  return `{${scope}}:${windowStartMs}`;
}

/** The introspection counter of `organisationId` in the window starting at `windowStartMs` (C-271). */
export function introspectionCounterKey(organisationId: string, windowStartMs: number): string {
  return `{org:${organisationId}}:introspect:${windowStartMs}`;
}

/**
 * The own window of key `keyId` of `organisationId` (C-292) starting at `windowStartMs`: in the
 * organisation's slot, so that it is counted in the same call as the organisation's counter.
 */
export function keyCounterKey(organisationId: string, keyId: string, windowStartMs: number): string {
  return `{org:${organisationId}}:key:${keyId}:${windowStartMs}`;
}

/** Redis Cluster's hash slots. */
const CLUSTER_SLOTS = 16_384;

/** CRC16-CCITT (XMODEM), the hash Redis Cluster maps keys to slots with: one table entry per byte value. */
const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let n = 0; n < 256; n++) {
    let crc = n << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[n] = crc;
  }
  return table;
})();

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}

/** The Redis Cluster hash slot of a key name (of its `{tag}` when it has a non-empty one), whatever prefix goes in front without braces. */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(new TextEncoder().encode(key)) % CLUSTER_SLOTS;
}

/** For every slot, a short hash tag that maps to it (built on first use: about 170 000 CRCs of 3 to 5 bytes, a few ms). */
let slotTags: string[] | undefined;
function slotTag(slot: number): string {
  if (slotTags === undefined) {
    const tags = new Array<string>(CLUSTER_SLOTS);
    let found = 0;
    for (let n = 0; found < CLUSTER_SLOTS; n++) {
      const tag = `cc${n.toString(36)}`;
      // the tags are ASCII: their bytes are their char codes
      let crc = 0;
      for (let i = 0; i < tag.length; i++) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ tag.charCodeAt(i)) & 0xff]!;
      const s = crc % CLUSTER_SLOTS;
      if (tags[s] === undefined) {
        tags[s] = tag;
        found++;
      }
    }
    slotTags = tags;
  }
  return slotTags[slot]!;
}

/** The freshness keys of `organisationId`. */
export function freshnessKeys(organisationId: string): FreshnessKeys {
  const token = `{org:${organisationId}}:cc:token`;
  const slot = `{${slotTag(keySlot(token))}}`;
  return { token, changes: `{org:${organisationId}}:cc:changes`, alive: `${slot}:cc:alive`, unsettled: `${slot}:cc:unsettled` };
}
