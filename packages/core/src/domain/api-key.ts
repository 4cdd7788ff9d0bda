/** API key format, generation, digest and lifecycle (spec §2-§3, C-22, C-23, C-30, C-31, C-36). */
import { hash, timingSafeEqual } from 'node:crypto';
import type { Random } from './random.js';
import { ALL_BUILTIN_SCOPES } from './scopes.js';

export type KeyEnvironment = 'live' | 'test';
export type KeyStatus = 'active' | 'revoked' | 'expired';

export const KEY_PREFIXES: Readonly<Record<KeyEnvironment, string>> = { live: 'svc_live_', test: 'svc_test_' };
export const KEY_RANDOM_LENGTH = 48;
export const KEY_LENGTH = 57;
export const KEY_PREFIX_LENGTH = 12;
export const KEY_PATTERN = /^svc_(live|test)_[A-Za-z0-9]{48}$/;
export const KEY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
export const LABEL_MAX = 100;

export interface ApiKey {
  readonly id: string;
  readonly organisationId: string;
  readonly label: string;
  /** First 12 characters of the raw key. */
  readonly keyPrefix: string;
  /** Lower-case hex SHA-256 of the raw key: the only form in which a key is stored (C-31). */
  readonly digest: string;
  readonly expiresAt: Date | null;
  readonly createdAt: Date;
  readonly revokedAt: Date | null;
  /**
   * Time of the last successful authentication with the key, accurate to 60 s (it is written in
   * batches by KeyUsage, never on the request path); null when never used. Stores always return it;
   * a record being inserted may leave it out (a new key has not been used).
   */
  readonly lastUsedAt?: Date | null;
  /** The key this one replaced through a roll, or null. At most one key is rolled from any key. */
  readonly rolledFromKeyId?: string | null;
  /**
   * Scopes (C-60): sorted, without duplicates, fixed at issue. Stores always return them; a record
   * being inserted without them holds every built-in scope (as keys issued before scopes existed).
   */
  readonly scopes?: readonly string[];
  /** The key that issued or rolled this one (C-61), or null when an operator did. Stores always return it. */
  readonly createdByKeyId?: string | null;
  /**
   * Free-form labels of the key (C-260): string to string, at most METADATA_MAX_KEYS entries. Stores
   * always return it (`{}` when none); a record being inserted without it has none.
   */
  readonly metadata?: Readonly<Record<string, string>>;
  /**
   * The networks requests with the key may come from (C-262), canonical CIDRs; null: any address.
   * Stores always return it; a record being inserted without it is unrestricted.
   */
  readonly allowedCidrs?: readonly string[] | null;
  /**
   * The key's own limit (C-290): requests per UTC minute counted against the key as well as its
   * organisation; null: none, the organisation's limit alone applies. Stores always return it; a
   * record being inserted without it has none.
   */
  readonly rateLimitPerMinute?: number | null;
}

/** A key's own limit per minute, or null when it has none. */
export function keyRateLimitOf(key: Pick<ApiKey, 'rateLimitPerMinute'>): number | null {
  return key.rateLimitPerMinute ?? null;
}

/** Metadata limits (C-260): entries, name length and characters, value length. */
export const METADATA_MAX_KEYS = 20;
export const METADATA_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,40}$/;
export const METADATA_VALUE_MAX = 500;

/** A key's metadata (`{}` for a record that holds none). */
export function metadataOf(key: Pick<ApiKey, 'metadata'>): Readonly<Record<string, string>> {
  return key.metadata ?? {};
}

/** A key's allowed networks (null, any address, for a record that names none). */
export function allowedCidrsOf(key: Pick<ApiKey, 'allowedCidrs'>): readonly string[] | null {
  return key.allowedCidrs ?? null;
}

/** Metadata as stored: a JSON object with its names sorted, so equal metadata is equal text. */
export function encodeMetadata(metadata: Readonly<Record<string, string>>): string {
  // fromEntries defines own properties, so a name such as `__proto__` is an entry like any other.
  return JSON.stringify(Object.fromEntries(Object.entries(metadata).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))));
}

export function decodeMetadata(text: string): Record<string, string> {
  const parsed = JSON.parse(text) as unknown;
  if (typeof parsed !== 'object' || parsed === null) return {};
  return Object.fromEntries(Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

/** The scopes a key holds (every built-in scope for a record that names none). */
export function scopesOf(key: Pick<ApiKey, 'scopes'>): readonly string[] {
  return key.scopes ?? ALL_BUILTIN_SCOPES;
}

/** Longest grace period of a roll: 7 days (the old key keeps working at most that long). */
export const MAX_ROLL_GRACE_SECONDS = 604_800;

/** 409 of a roll whose key already has a replacement (the store's unique rolledFromKeyId). */
export const KEY_ALREADY_ROLLED_MESSAGE = 'This API key has already been rolled; roll its replacement instead';

/** The environment a key was issued in, read from its prefix (a roll keeps it). */
export function keyEnvironmentOf(key: Pick<ApiKey, 'keyPrefix'>): KeyEnvironment {
  return key.keyPrefix.startsWith(KEY_PREFIXES.test) ? 'test' : 'live';
}

/** Largest multiple of the alphabet size that fits in a byte: bytes at or above it are rejected. */
const UNBIASED_BYTE_LIMIT = 256 - (256 % KEY_ALPHABET.length);

/**
 * A raw key: the environment's prefix plus 48 characters drawn uniformly from [A-Za-z0-9] (C-30).
 * Rejection sampling keeps every character equally likely (no modulo bias).
 */
export function generateRawKey(environment: KeyEnvironment, random: Random): string {
  let out = KEY_PREFIXES[environment];
  while (out.length < KEY_LENGTH) {
    const bytes = random.bytes(64);
    for (const b of bytes) {
      if (b >= UNBIASED_BYTE_LIMIT) continue;
      out += KEY_ALPHABET[b % KEY_ALPHABET.length];
      if (out.length === KEY_LENGTH) break;
    }
  }
  return out;
}

export function isWellFormedKey(raw: string): boolean {
  return raw.length === KEY_LENGTH && KEY_PATTERN.test(raw);
}

/**
 * Lower-case hex SHA-256 of the raw key (C-31). One-shot `crypto.hash` (every Node this package
 * supports has it) skips createHash's Hash object: a third of the cost on every request.
 */
export function digestKey(raw: string): string {
  return hash('sha256', raw, 'hex');
}

/** Hex digests up to this many characters (SHA-256 and SHA-512) are compared in the scratch buffers. */
const SCRATCH_HEX_CHARS = 128;
const scratchA = Buffer.alloc(SCRATCH_HEX_CHARS / 2);
const scratchB = Buffer.alloc(SCRATCH_HEX_CHARS / 2);

/**
 * Constant-time comparison of two hex digests: their bytes as `Buffer.from(x, 'hex')` decodes them,
 * equal in length, not empty, and equal by `timingSafeEqual`. Digests of a usual size are decoded
 * into two module-level scratch buffers (zeroed first, so both hold the same bytes past the decoded
 * ones) instead of two new Buffers: admission compares one on every request. Nothing awaits
 * between the writes and the comparison, so no other call can use the buffers in between.
 */
export function digestsEqual(a: string, b: string): boolean {
  if (a.length > SCRATCH_HEX_CHARS || b.length > SCRATCH_HEX_CHARS) {
    const ba = Buffer.from(a, 'hex');
    const bb = Buffer.from(b, 'hex');
    return ba.length === bb.length && ba.length > 0 && timingSafeEqual(ba, bb);
  }
  scratchA.fill(0);
  scratchB.fill(0);
  const na = scratchA.write(a, 'hex');
  const nb = scratchB.write(b, 'hex');
  return timingSafeEqual(scratchA, scratchB) && na === nb && na > 0;
}

export function keyPrefixOf(raw: string): string {
  return raw.slice(0, KEY_PREFIX_LENGTH);
}

/** Status at `now`: revoked wins over expired; a key expires at `expiresAt` exactly (spec §3). */
export function keyStatus(key: Pick<ApiKey, 'revokedAt' | 'expiresAt'>, now: Date): KeyStatus {
  if (key.revokedAt !== null) return 'revoked';
  if (key.expiresAt !== null && key.expiresAt.getTime() <= now.getTime()) return 'expired';
  return 'active';
}
