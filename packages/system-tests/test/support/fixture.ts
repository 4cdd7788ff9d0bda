/**
 * The standard cast of a system test: a platform organisation, two tenants ("own" and "other"),
 * a revoked key, an expired key, a well-formed key never issued, and spare keys per organisation
 * that tests may revoke.
 */
import { OPERATOR, type Core } from '@cos/core';
import { createTenant, wellFormedUnknownKey, type Tenant } from './stack.js';
import type { Fixture } from './fuzz-arbitraries.js';
import { sleep } from './free-port.js';

export interface Cast extends Fixture {
  readonly platform: Tenant;
  readonly own: Tenant;
  readonly other: Tenant;
  /** Every raw key issued for this cast (for secret scans). */
  readonly rawKeys: string[];
}

async function spareKeys(core: Core, orgId: string, n: number, rawKeys: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 1) {
    const issued = await core.apiKeys.issue(OPERATOR, orgId, { label: `spare ${i}` });
    rawKeys.push(issued.rawKey);
    ids.push(issued.key.id);
  }
  return ids;
}

export async function createCast(core: Core, options: { spares?: number; expiringMs?: number } = {}): Promise<Cast> {
  const platform = await createTenant(core, 'platform', { system: true });
  const own = await createTenant(core, 'own');
  const other = await createTenant(core, 'other');
  const rawKeys = [platform.key, own.key, other.key];

  const revoked = await core.apiKeys.issue(OPERATOR, own.id, { label: 'revoked' });
  await core.apiKeys.revoke(OPERATOR, own.id, revoked.key.id);
  // The expiry must still be in the future when the core validates it (C-23).
  const expiringMs = Math.max(250, options.expiringMs ?? 1200);
  const expiresAt = new Date(core.clock.now().getTime() + expiringMs);
  const expired = await core.apiKeys.issue(OPERATOR, own.id, { label: 'expiring', expires_at: expiresAt.toISOString() });
  rawKeys.push(revoked.rawKey, expired.rawKey);

  const spares = options.spares ?? 4;
  const extraKeyIds = {
    ownExtra: await spareKeys(core, own.id, spares, rawKeys),
    otherExtra: await spareKeys(core, other.id, spares, rawKeys),
    platformExtra: await spareKeys(core, platform.id, spares, rawKeys),
  };
  const wait = expiresAt.getTime() - core.clock.now().getTime() + 20;
  if (wait > 0) await sleep(wait);

  return {
    platform,
    own,
    other,
    rawKeys,
    orgs: { platform: platform.id, own: own.id, other: other.id },
    keys: {
      platform: platform.key,
      own: own.key,
      other: other.key,
      revoked: revoked.rawKey,
      expired: expired.rawKey,
      unknown: wellFormedUnknownKey(0.4242),
    },
    extraKeyIds,
  };
}
