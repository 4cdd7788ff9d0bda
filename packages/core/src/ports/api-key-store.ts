import type { ApiKey } from '../domain/api-key.js';
import type { Organisation } from '../domain/organisation.js';
import type { PageRequest } from './pagination.js';

/** What authentication needs, fetched in one indexed query (the hot path). */
export interface Credential {
  readonly key: ApiKey;
  readonly organisation: Organisation;
}

/** One successful authentication with a key, as KeyUsage flushes it. */
export interface KeyUse {
  readonly keyId: string;
  readonly at: Date;
}

/** The attributes of a key that can be changed after issue (C-261). */
export interface KeyAttributes {
  readonly label: string;
  readonly metadata: Readonly<Record<string, string>>;
  /** Canonical CIDRs, or null for any address. */
  readonly allowedCidrs: readonly string[] | null;
  /** The key's own limit per minute (C-290), or null for none. */
  readonly rateLimitPerMinute: number | null;
}

/** An update of a key's attributes: the values it is expected to hold now, and the new ones. */
export interface KeyAttributesChange {
  readonly from: KeyAttributes;
  readonly to: KeyAttributes;
}

/** What a key list may be narrowed to. */
export interface KeyListFilter {
  /** Only keys active at `now` (not revoked, expiring after it) whose expiry is at or before `until` (C-283). */
  readonly expiring?: { readonly now: Date; readonly until: Date };
}

export interface ApiKeyStore {
  /**
   * Inserts (lastUsedAt is stored null; scopes omitted: every built-in scope; createdByKeyId
   * omitted: null). A duplicate digest throws ConflictError; so does a second
   * key rolled from the same key (rolledFromKeyId is unique: KEY_ALREADY_ROLLED_MESSAGE), which is
   * what lets exactly one of concurrent rolls of a key commit.
   */
  insert(key: ApiKey): Promise<void>;
  /** The key with that id inside that organisation, or null (also null when it belongs to another). */
  findById(organisationId: string, keyId: string): Promise<ApiKey | null>;
  /** The key with that digest together with its organisation, or null. */
  findCredential(digest: string): Promise<Credential | null>;
  /** Keys of one organisation (those `filter` keeps) ordered by (createdAt, id), strictly after `page.after`, at most `page.limit`. */
  list(organisationId: string, page: PageRequest, filter?: KeyListFilter): Promise<ApiKey[]>;
  /** Keys neither revoked nor expired at `now`. */
  countActive(organisationId: string, now: Date): Promise<number>;
  /**
   * Sets revokedAt if the key is not yet revoked. Returns true when this call revoked it,
   * false when it was already revoked or does not exist in that organisation.
   */
  revoke(organisationId: string, keyId: string, at: Date): Promise<boolean>;
  /**
   * Sets expiresAt to `expiresAt` if the key is still active at `now` (not revoked, not expired)
   * and `expiresAt` is earlier than its current expiry (none counts as later): a key's life is
   * only ever shortened. Returns true when this call changed the key, false otherwise (unknown,
   * another organisation's, revoked, expired, or already ending at or before `expiresAt`).
   * One conditional statement: of concurrent calls, only those that still see an active key with a
   * later expiry change it. Like revoke, a write that affects authentication (C-36).
   */
  shortenExpiry(organisationId: string, keyId: string, expiresAt: Date, now: Date): Promise<boolean>;
  /**
   * Sets the key's label, metadata, allowedCidrs and rateLimitPerMinute to `change.to` if it is active at `now` (not
   * revoked, not expired) and still holds exactly `change.from` (metadata compared as a whole,
   * whatever the order of its names). Returns true when this call changed the key, false otherwise
   * (unknown, another organisation's, revoked, expired, or changed by someone else since it was
   * read). One conditional statement, so of concurrent updates made from the same reading only one
   * applies. A write that affects authentication (allowedCidrs, rateLimitPerMinute; the record cached with the key, C-36).
   */
  update(organisationId: string, keyId: string, change: KeyAttributesChange, now: Date): Promise<boolean>;
  /**
   * Records successful authentications: each key's lastUsedAt becomes the latest of its current
   * value and the given times (never earlier, so instances may flush in any order). Unknown key ids
   * are ignored. One statement for the whole batch (KeyUsage: at most one flush a second, one write per key per ~55 s).
   */
  recordUses(uses: readonly KeyUse[]): Promise<void>;
  /**
   * Remembers that the key was reported exposed at `url` (null: no URL given). True the first time
   * for that (key, url) pair, false for a repeat (a redelivered secret-scanning alert).
   */
  recordExposure(keyId: string, url: string | null, at: Date): Promise<boolean>;
  /**
   * The keys whose createdByKeyId is `createdByKeyId` (C-61: issued or rolled by that key), in any
   * state and in every organisation (a platform key issues keys in other organisations: C-100),
   * ordered by (createdAt, id). The lineage walk reads the children of one key per call.
   */
  listCreatedBy(createdByKeyId: string): Promise<ApiKey[]>;
  /**
   * The keys, in every organisation, whose expiry notice is due at `now` (C-280, C-282): active
   * (not revoked, expiring after `now`), without a recorded notice, and expiring within their
   * organisation's expiry notice period of `now` (the default policy's for an organisation without
   * one; a period of 0 is never due). Ordered by (expiresAt, id), at most `limit`. One query on an
   * index of the keys not yet noticed, by expiry.
   */
  listExpiryNoticesDue(now: Date, limit: number): Promise<ApiKey[]>;
  /**
   * Records the key's expiry notice as sent at `now` if it is due then (as listExpiryNoticesDue
   * says). True when this call recorded it; false otherwise (recorded already, revoked, expired,
   * outside its period, unknown). One conditional statement: of concurrent calls for one key, in
   * any number of processes, exactly one returns true (C-282). Not a credential change.
   */
  claimExpiryNotice(keyId: string, now: Date): Promise<boolean>;
}
