/**
 * The provider side of a public code-hosting secret-scanning partner programme: the scanner signs
 * each alert with ECDSA (P-256, SHA-256) over the exact raw body and names the signing key by an
 * identifier (how both travel is the HTTP adapter's business: adapter-koa's secret-scanning route). The
 * public keys come in the shape the programme publishes them in (a file, or the programme's URL):
 *
 *   {"public_keys":[{"key_identifier":"…","key":"-----BEGIN PUBLIC KEY-----…","is_current":true}]}
 */
import { createPublicKey, hash, verify, type KeyObject } from 'node:crypto';

/** The 401 of an alert without a signature, or whose signature does not verify with the scanner's keys. */
export const INVALID_SIGNATURE_MESSAGE = 'Missing or invalid secret-scanning signature';

/** The scanner's public keys by identifier. */
export interface ScannerKeySet {
  /** How many keys the set holds. */
  readonly size: number;
  /** True when `signature` (base64 DER) verifies over exactly `body` with the key `identifier`. */
  verify(identifier: string | undefined, signature: string | undefined, body: Uint8Array): boolean;
  /** True when the set holds a key named `identifier` (absent on sets made elsewhere: unknown). */
  has?(identifier: string): boolean;
}

/** No keys at all: every alert is refused. */
export const EMPTY_SCANNER_KEYS: ScannerKeySet = Object.freeze({ size: 0, verify: () => false, has: () => false });

/** The keys of every set: an identifier is looked up in each, in order. */
export function combineScannerKeys(sets: readonly ScannerKeySet[]): ScannerKeySet {
  if (sets.length === 1) return sets[0]!;
  return {
    size: sets.reduce((n, s) => n + s.size, 0),
    verify: (identifier, signature, body) => sets.some((s) => s.verify(identifier, signature, body)),
    has: (identifier) => sets.some((s) => s.has?.(identifier) === true),
  };
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
/** A DER ECDSA P-256 signature is at most 72 bytes: anything much longer is not one. */
const MAX_SIGNATURE_CHARS = 256;
const MAX_IDENTIFIER_CHARS = 256;

/** Parses the programme's public-key document; throws an Error saying what is wrong. */
export function parseScannerKeys(text: string): ScannerKeySet {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error('is not JSON');
  }
  const list = (doc as { public_keys?: unknown } | null)?.public_keys;
  if (!Array.isArray(list) || list.length === 0) throw new Error('has no "public_keys" array with at least one key');
  const keys = new Map<string, KeyObject>();
  list.forEach((entry: unknown, i) => {
    const { key_identifier: id, key } = (entry ?? {}) as { key_identifier?: unknown; key?: unknown };
    if (typeof id !== 'string' || id.length === 0 || id.length > MAX_IDENTIFIER_CHARS) {
      throw new Error(`public_keys[${i}].key_identifier must be a non-empty string`);
    }
    if (typeof key !== 'string') throw new Error(`public_keys[${i}].key must be a PEM public key`);
    let object: KeyObject;
    try {
      object = createPublicKey(key);
    } catch {
      throw new Error(`public_keys[${i}].key is not a PEM public key`);
    }
    if (object.asymmetricKeyType !== 'ec' || object.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
      throw new Error(`public_keys[${i}].key is not an ECDSA P-256 key`);
    }
    keys.set(id, object);
  });
  return {
    size: keys.size,
    has: (identifier) => keys.has(identifier.trim()),
    verify(identifier, signature, body) {
      if (identifier === undefined || signature === undefined) return false;
      const key = keys.get(identifier.trim());
      const sig = signature.trim();
      if (key === undefined || sig.length === 0 || sig.length > MAX_SIGNATURE_CHARS || !BASE64.test(sig)) return false;
      try {
        return verify('sha256', body, { key, dsaEncoding: 'der' }, Buffer.from(sig, 'base64'));
      } catch {
        return false;
      }
    },
  };
}

/** The feedback's `token_hash`: lower-case hex SHA-256 of the token as the scanner sent it. */
export function tokenHash(token: string): string {
  return hash('sha256', token, 'hex');
}
