/** In memory: API keys (ApiKeyStore), their use and recorded exposures. */
import { allowedCidrsOf, digestsEqual, encodeMetadata, keyRateLimitOf, metadataOf, scopesOf, type ApiKey } from '../../domain/api-key.js';
import { sortedScopes } from '../../domain/scopes.js';
import { uniqueConflict } from '../../domain/errors.js';
import { DEFAULT_KEY_POLICY } from '../../domain/key-policy.js';
import type { ApiKeyStore, Credential, KeyAttributes, KeyAttributesChange, KeyListFilter, KeyUse } from '../../ports/api-key-store.js';
import type { PageRequest } from '../../ports/pagination.js';
import { compareKeyset, copyDate, copyDateOrNull, copyOrganisation, page, duplicateId, type Tables } from '../in-memory-tables.js';
import type { Session } from '../in-memory-session.js';

function copyApiKey(k: ApiKey): ApiKey {
  return {
    id: k.id,
    organisationId: k.organisationId,
    label: k.label,
    keyPrefix: k.keyPrefix,
    digest: k.digest,
    expiresAt: copyDateOrNull(k.expiresAt),
    createdAt: copyDate(k.createdAt),
    revokedAt: copyDateOrNull(k.revokedAt),
    lastUsedAt: copyDateOrNull(k.lastUsedAt ?? null),
    rolledFromKeyId: k.rolledFromKeyId ?? null,
    scopes: sortedScopes(scopesOf(k)),
    createdByKeyId: k.createdByKeyId ?? null,
    metadata: { ...metadataOf(k) },
    allowedCidrs: k.allowedCidrs == null ? null : [...k.allowedCidrs],
    rateLimitPerMinute: keyRateLimitOf(k),
  };
}

/** Whether the key holds exactly `a` (metadata compared as a whole, whatever the order of its names). */
function holds(k: ApiKey, a: KeyAttributes): boolean {
  const cidrs = allowedCidrsOf(k);
  return (
    k.label === a.label &&
    keyRateLimitOf(k) === a.rateLimitPerMinute &&
    encodeMetadata(metadataOf(k)) === encodeMetadata(a.metadata) &&
    (cidrs === null ? a.allowedCidrs === null : a.allowedCidrs !== null && JSON.stringify(cidrs) === JSON.stringify(a.allowedCidrs))
  );
}

/** Active at `nowMs` and expiring at or before `untilMs`. */
function expiringBy(k: ApiKey, nowMs: number, untilMs: number): boolean {
  return k.revokedAt === null && k.expiresAt !== null && k.expiresAt.getTime() > nowMs && k.expiresAt.getTime() <= untilMs;
}

/** Whether the key's expiry notice is due at `nowMs` (ApiKeyStore.listExpiryNoticesDue). */
function noticeDue(t: Tables, k: ApiKey, nowMs: number): boolean {
  if (t.expiryNotices.has(k.id)) return false;
  const seconds = (t.keyPolicies.get(k.organisationId) ?? DEFAULT_KEY_POLICY).expiryNoticeSeconds;
  return expiringBy(k, nowMs, nowMs + seconds * 1000);
}

export class InMemoryApiKeyStore implements ApiKeyStore {
  constructor(private readonly session: Session) {}

  async insert(key: ApiKey): Promise<void> {
    const record = { ...copyApiKey(key), lastUsedAt: null };
    this.session.write((t) => {
      if (t.apiKeys.has(record.id)) throw duplicateId('API key');
      for (const k of t.apiKeys.values()) {
        if (digestsEqual(k.digest, record.digest)) {
          throw uniqueConflict('digest');
        }
        if (record.rolledFromKeyId !== null && k.rolledFromKeyId === record.rolledFromKeyId) {
          throw uniqueConflict('rolled_key');
        }
      }
      t.apiKeys.set(record.id, record);
    });
  }

  async findById(organisationId: string, keyId: string): Promise<ApiKey | null> {
    return this.session.read((t) => {
      const k = t.apiKeys.get(keyId);
      return k === undefined || k.organisationId !== organisationId ? null : copyApiKey(k);
    });
  }

  async findCredential(digest: string): Promise<Credential | null> {
    return this.session.read((t) => {
      for (const k of t.apiKeys.values()) {
        // Constant-time, like every digest comparison (C-31), even in this in-memory adapter.
        if (!digestsEqual(k.digest, digest)) continue;
        const organisation = t.organisations.get(k.organisationId);
        if (organisation === undefined) return null;
        return { key: copyApiKey(k), organisation: copyOrganisation(organisation) };
      }
      return null;
    });
  }

  async list(organisationId: string, request: PageRequest, filter: KeyListFilter = {}): Promise<ApiKey[]> {
    const expiring = filter.expiring === undefined ? null : { now: filter.expiring.now.getTime(), until: filter.expiring.until.getTime() };
    return this.session.read((t) =>
      page(
        [...t.apiKeys.values()].filter((k) => k.organisationId === organisationId && (expiring === null || expiringBy(k, expiring.now, expiring.until))),
        (k) => k,
        request,
        copyApiKey,
      ),
    );
  }

  async countActive(organisationId: string, now: Date): Promise<number> {
    const nowMs = now.getTime();
    return this.session.read((t) => {
      let n = 0;
      for (const k of t.apiKeys.values()) {
        if (k.organisationId !== organisationId || k.revokedAt !== null) continue;
        if (k.expiresAt !== null && k.expiresAt.getTime() <= nowMs) continue;
        n += 1;
      }
      return n;
    });
  }

  async revoke(organisationId: string, keyId: string, at: Date): Promise<boolean> {
    const revokedAt = copyDate(at);
    this.session.credentialWrite(organisationId, 'apiKeys.revoke');
    return this.session.write((t) => {
      const k = t.apiKeys.get(keyId);
      if (k === undefined || k.organisationId !== organisationId || k.revokedAt !== null) return false;
      t.apiKeys.set(keyId, { ...k, revokedAt: copyDate(revokedAt) });
      return true;
    });
  }

  async shortenExpiry(organisationId: string, keyId: string, expiresAt: Date, now: Date): Promise<boolean> {
    const target = expiresAt.getTime();
    const nowMs = now.getTime();
    this.session.credentialWrite(organisationId, 'apiKeys.shortenExpiry');
    return this.session.write((t) => {
      const k = t.apiKeys.get(keyId);
      if (k === undefined || k.organisationId !== organisationId || k.revokedAt !== null) return false;
      const current = k.expiresAt === null ? Number.POSITIVE_INFINITY : k.expiresAt.getTime();
      if (current <= nowMs || current <= target) return false;
      t.apiKeys.set(keyId, { ...k, expiresAt: new Date(target) });
      return true;
    });
  }

  async update(organisationId: string, keyId: string, change: KeyAttributesChange, now: Date): Promise<boolean> {
    const nowMs = now.getTime();
    const { label, rateLimitPerMinute } = change.to;
    const metadata = { ...change.to.metadata };
    const allowedCidrs = change.to.allowedCidrs === null ? null : [...change.to.allowedCidrs];
    this.session.credentialWrite(organisationId, 'apiKeys.update');
    return this.session.write((t) => {
      const k = t.apiKeys.get(keyId);
      if (k === undefined || k.organisationId !== organisationId || k.revokedAt !== null) return false;
      if (k.expiresAt !== null && k.expiresAt.getTime() <= nowMs) return false;
      if (!holds(k, change.from)) return false;
      t.apiKeys.set(keyId, { ...k, label, metadata, allowedCidrs, rateLimitPerMinute });
      return true;
    });
  }

  async recordUses(uses: readonly KeyUse[]): Promise<void> {
    const latest = new Map<string, number>();
    for (const u of uses) latest.set(u.keyId, Math.max(latest.get(u.keyId) ?? Number.NEGATIVE_INFINITY, u.at.getTime()));
    this.session.write((t) => {
      for (const [keyId, ms] of latest) {
        const k = t.apiKeys.get(keyId);
        if (k === undefined || (k.lastUsedAt != null && k.lastUsedAt.getTime() >= ms)) continue;
        t.apiKeys.set(keyId, { ...k, lastUsedAt: new Date(ms) });
      }
    });
  }

  async listCreatedBy(createdByKeyId: string): Promise<ApiKey[]> {
    return this.session.read((t) =>
      page(
        [...t.apiKeys.values()].filter((k) => k.createdByKeyId === createdByKeyId),
        (k) => k,
        { limit: Number.MAX_SAFE_INTEGER, after: null },
        copyApiKey,
      ),
    );
  }

  async recordExposure(keyId: string, url: string | null, _at: Date): Promise<boolean> {
    const entry = `${keyId} ${url ?? ''}`;
    return this.session.write((t) => {
      if (t.exposures.has(entry)) return false;
      t.exposures.add(entry);
      return true;
    });
  }

  async listExpiryNoticesDue(now: Date, limit: number): Promise<ApiKey[]> {
    const nowMs = now.getTime();
    return this.session.read((t) =>
      [...t.apiKeys.values()]
        .filter((k) => noticeDue(t, k, nowMs))
        .sort((a, b) => compareKeyset(a.expiresAt!.getTime(), a.id, b.expiresAt!.getTime(), b.id))
        .slice(0, Math.max(0, limit))
        .map(copyApiKey),
    );
  }

  async claimExpiryNotice(keyId: string, now: Date): Promise<boolean> {
    const nowMs = now.getTime();
    return this.session.write((t) => {
      const k = t.apiKeys.get(keyId);
      if (k === undefined || !noticeDue(t, k, nowMs)) return false;
      t.expiryNotices.set(keyId, new Date(nowMs));
      return true;
    });
  }
}
