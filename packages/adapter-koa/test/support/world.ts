/**
 * A whole service for one test: an in-memory core (createTestCore: in-memory store, in-process
 * counter, FakeClock, CapturingLogger), createKoaApp over it behind a real HTTP server, and a
 * seeded cast of organisations and keys, all created through the core's own use cases as the
 * operator would (no hand-made records).
 */
import type Koa from 'koa';
import { OPERATOR, type CoreConfig, type Metrics, type RateCounter } from '@cos/core';
import { CapturingLogger, createTestCore, type TestCore } from '@cos/core/testing';
import { createKoaApp, type HttpOptions } from '@cos/adapter-koa';
import type { StoreHarness } from '@cos/core/testing';
import { Api, listen, type Listening } from './http.js';

export const SERVICE_VERSION = '1.4.2';

export interface Tenant {
  readonly orgId: string;
  readonly slug: string;
  /** A raw key of the organisation, active. */
  readonly key: string;
  readonly keyId: string;
}

export interface World {
  readonly tc: TestCore<RateCounter>;
  readonly app: Koa;
  readonly api: Api;
  readonly listening: Listening;
  /** The HTTP adapter's logger (separate from the core's, so request lines are easy to find). */
  readonly httpLogger: CapturingLogger;
  readonly platform: Tenant;
  /** "own" organisation: a standard key's own organisation. */
  readonly own: Tenant;
  /** Another standard organisation. */
  readonly other: Tenant;
  /** A revoked and an expired key of `own`. */
  readonly revokedKey: string;
  readonly revokedKeyId: string;
  readonly expiredKey: string;
  readonly expiredKeyId: string;
  close(): Promise<void>;
}

export interface WorldOptions {
  config?: Partial<CoreConfig>;
  http?: Partial<HttpOptions>;
  store?: StoreHarness;
  counter?: RateCounter;
  /** The core's Metrics port (default: none). */
  metrics?: Metrics;
}

async function tenant(tc: TestCore<RateCounter>, name: string, slug: string, isSystem: boolean): Promise<Tenant> {
  const org = await tc.core.organisations.create(OPERATOR, { name, slug }, { isSystem });
  const issued = await tc.core.apiKeys.issue(OPERATOR, org.id, { label: `${slug} key` });
  return { orgId: org.id, slug, key: issued.rawKey, keyId: issued.key.id };
}

export async function createWorld(options: WorldOptions = {}): Promise<World> {
  const tc = createTestCore<RateCounter>({
    ...(options.config !== undefined ? { config: options.config } : {}),
    ...(options.store !== undefined ? { store: options.store } : {}),
    ...(options.counter !== undefined ? { counter: options.counter } : {}),
    ...(options.metrics !== undefined ? { metrics: options.metrics } : {}),
  });
  const platform = await tenant(tc, 'Platform', 'platform', true);
  const own = await tenant(tc, 'Acme Compliance', 'acme', false);
  const other = await tenant(tc, 'Globex', 'globex', false);
  await tc.core.members.add(OPERATOR, own.orgId, { email: 'ada@acme.example' });
  await tc.core.members.add(OPERATOR, other.orgId, { email: 'hank@globex.example' });

  const revoked = await tc.core.apiKeys.issue(OPERATOR, own.orgId, { label: 'to revoke' });
  await tc.core.apiKeys.revoke(OPERATOR, own.orgId, revoked.key.id);
  const expiresAt = new Date(tc.clock.now().getTime() + 1000);
  const expiring = await tc.core.apiKeys.issue(OPERATOR, own.orgId, { label: 'expiring', expires_at: expiresAt.toISOString() });
  tc.clock.advance(1000); // exactly at expires_at: expired (spec §3); still inside the same UTC minute

  const httpLogger = new CapturingLogger();
  const app = createKoaApp({ core: tc.core, logger: httpLogger }, { serviceVersion: SERVICE_VERSION, ...options.http });
  const listening = await listen(app.callback());
  const api = new Api(listening.baseUrl);
  return {
    tc,
    app,
    api,
    listening,
    httpLogger,
    platform,
    own,
    other,
    revokedKey: revoked.rawKey,
    revokedKeyId: revoked.key.id,
    expiredKey: expiring.rawKey,
    expiredKeyId: expiring.key.id,
    close: () => listening.close(),
  };
}

/** A syntactically valid key that was never issued. */
export const UNKNOWN_KEY = `svc_live_${'Q'.repeat(48)}`;
/** A v4-shaped UUID that names no organisation or key. */
export const MISSING_ID = '3f1c9a52-8d4e-4b7a-9c21-5e6f7a8b9c0d';
