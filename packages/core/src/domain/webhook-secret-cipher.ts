/**
 * Webhook signing secrets at rest: AES-256-GCM under an operator's key (WEBHOOK_SECRET_ENCRYPTION_KEY),
 * so a copy of the database (a backup, a replica, a dump) does not hold secrets that can sign
 * webhooks. The use cases seal a secret before it is stored and open it only where it signs a
 * delivery; the stores keep whatever text they are given.
 *
 * Stored form: `whenc:v1:<key id>:<iv>:<ciphertext>:<tag>` (base64url pieces, 12-byte IV, 16-byte
 * tag); the additional authenticated data is `whenc:v1:<key id>:<organisation id>`, so a sealed
 * secret copied to another organisation's row does not open. The key id is the first 12 hex digits
 * of the SHA-256 of the 32 key bytes: it names the key without revealing it, so the key that
 * opens a secret is found among the current and previous keys, and rotation works. A stored
 * `whsec_…` (written before a key was configured) is plaintext and opens as itself.
 */
import { createCipheriv, createDecipheriv, createHash } from 'node:crypto';
import type { Random } from './random.js';
import { WEBHOOK_SECRET_PREFIX } from './webhook.js';

export const WEBHOOK_SECRET_KEY_BYTES = 32;
export const SEALED_WEBHOOK_SECRET_PREFIX = 'whenc:v1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID_HEX = 12;

/** A stored secret that cannot be opened here: unknown key, altered value, or no known form. */
export class WebhookSecretUnreadableError extends Error {
  constructor(
    message: string,
    /** The key the stored secret names, when it names one. */
    readonly keyId: string | null,
  ) {
    super(message);
    this.name = 'WebhookSecretUnreadableError';
  }
}

/** The id of a key: the first 12 hex digits of SHA-256 over its 32 bytes. */
export function webhookSecretKeyId(key: Uint8Array): string {
  return createHash('sha256').update(key).digest('hex').slice(0, KEY_ID_HEX);
}

/**
 * A key as configured: 64 hex digits, or base64 (standard or URL-safe, padding optional) of exactly
 * 32 bytes. Throws an Error whose message never repeats the text (it is a secret).
 */
export function parseWebhookSecretKey(text: string): Uint8Array {
  const t = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return new Uint8Array(Buffer.from(t, 'hex'));
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(t)) {
    const bytes = Buffer.from(t.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (bytes.length === WEBHOOK_SECRET_KEY_BYTES) return new Uint8Array(bytes);
  }
  throw new Error('must be 32 bytes written as 64 hex digits or as base64 (e.g. `openssl rand -base64 32`)');
}

export interface WebhookSecretKeys {
  /** Seals new secrets, and opens what it sealed; null: secrets are stored as they are (`whsec_…`). */
  readonly current?: Uint8Array | null;
  /** Open only: keys of earlier configurations, while `reencrypt-secrets` moves their secrets to `current`. */
  readonly previous?: readonly Uint8Array[];
}

const b64url = (b: Uint8Array): string => Buffer.from(b).toString('base64url');

function aad(keyId: string, organisationId: string): Buffer {
  return Buffer.from(`${SEALED_WEBHOOK_SECRET_PREFIX}${keyId}:${organisationId}`, 'utf8');
}

export class WebhookSecretCipher {
  /** Id of the key new secrets are sealed under; null when they are stored in clear. */
  readonly currentKeyId: string | null;
  readonly #current: Uint8Array | null;
  readonly #keys: ReadonlyMap<string, Uint8Array>;

  constructor(keys: WebhookSecretKeys = {}) {
    const current = keys.current ?? null;
    for (const k of [...(current !== null ? [current] : []), ...(keys.previous ?? [])]) {
      if (k.length !== WEBHOOK_SECRET_KEY_BYTES) throw new Error(`a webhook secret key must be ${WEBHOOK_SECRET_KEY_BYTES} bytes`);
    }
    this.#current = current === null ? null : new Uint8Array(current);
    this.currentKeyId = current === null ? null : webhookSecretKeyId(current);
    const map = new Map<string, Uint8Array>();
    for (const k of keys.previous ?? []) map.set(webhookSecretKeyId(k), new Uint8Array(k));
    if (this.#current !== null) map.set(this.currentKeyId!, this.#current);
    this.#keys = map;
  }

  /** Ids of every key that can open a secret (current first). */
  get keyIds(): string[] {
    const ids = [...this.#keys.keys()];
    return this.currentKeyId === null ? ids : [this.currentKeyId, ...ids.filter((id) => id !== this.currentKeyId)];
  }

  /** The form to store `secret` in for `organisationId`: sealed under the current key, or as is without one. */
  seal(organisationId: string, secret: string, random: Random): string {
    if (this.#current === null) return secret;
    const keyId = this.currentKeyId!;
    const iv = random.bytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#current, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad(keyId, organisationId));
    const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return `${SEALED_WEBHOOK_SECRET_PREFIX}${keyId}:${b64url(iv)}:${b64url(ciphertext)}:${b64url(cipher.getAuthTag())}`;
  }

  /** The key id a stored secret is sealed under; null for a plaintext `whsec_…`. */
  keyIdOf(stored: string): string | null {
    if (!stored.startsWith(SEALED_WEBHOOK_SECRET_PREFIX)) return null;
    return stored.slice(SEALED_WEBHOOK_SECRET_PREFIX.length).split(':', 1)[0] ?? '';
  }

  /** True when `stored` is in the form `seal` would write now (sealed under the current key, or plaintext without one). */
  isCurrent(stored: string): boolean {
    const keyId = this.keyIdOf(stored);
    return this.currentKeyId === null ? keyId === null && stored.startsWith(WEBHOOK_SECRET_PREFIX) : keyId === this.currentKeyId;
  }

  /** The signing secret a stored value holds. Throws WebhookSecretUnreadableError (never with the value in it). */
  open(organisationId: string, stored: string): string {
    if (!stored.startsWith(SEALED_WEBHOOK_SECRET_PREFIX)) {
      if (stored.startsWith(WEBHOOK_SECRET_PREFIX)) return stored;
      throw new WebhookSecretUnreadableError('the stored webhook signing secret is in no known form', null);
    }
    const parts = stored.slice(SEALED_WEBHOOK_SECRET_PREFIX.length).split(':');
    const keyId = parts[0] ?? '';
    if (parts.length !== 4 || !/^[0-9a-f]{12}$/.test(keyId)) {
      throw new WebhookSecretUnreadableError('the stored webhook signing secret is in no known form', null);
    }
    const key = this.#keys.get(keyId);
    if (key === undefined) {
      throw new WebhookSecretUnreadableError(
        `the webhook signing secret is encrypted under key ${keyId}, which is not configured ` +
          '(set WEBHOOK_SECRET_ENCRYPTION_KEY or WEBHOOK_SECRET_PREVIOUS_KEYS to that key)',
        keyId,
      );
    }
    try {
      const [iv, ciphertext, tag] = parts.slice(1).map((p) => Buffer.from(p, 'base64url'));
      if (iv!.length !== IV_BYTES || tag!.length !== TAG_BYTES) throw new Error('bad lengths');
      const decipher = createDecipheriv('aes-256-gcm', key, iv!, { authTagLength: TAG_BYTES });
      decipher.setAAD(aad(keyId, organisationId));
      decipher.setAuthTag(tag!);
      const secret = Buffer.concat([decipher.update(ciphertext!), decipher.final()]).toString('utf8');
      if (!secret.startsWith(WEBHOOK_SECRET_PREFIX)) throw new Error('not a signing secret');
      return secret;
    } catch {
      throw new WebhookSecretUnreadableError(
        `the webhook signing secret does not decrypt under key ${keyId} (the stored value was altered or belongs to another organisation)`,
        keyId,
      );
    }
  }
}

/** No key: secrets are stored and read as `whsec_…` (the default). */
export const PLAINTEXT_WEBHOOK_SECRETS = new WebhookSecretCipher();
