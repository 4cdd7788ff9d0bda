/**
 * Shared set-up for the use-case tests: a whole core over the real in-memory adapters
 * (@cos/core/testing) with a FakeClock, and helpers that create organisations and keys the way a
 * caller would (operator for set-up, then authenticating the raw key to get a real principal).
 */
import { expect } from 'chai';
import {
  createCore,
  DomainError,
  OPERATOR,
  type Admitted,
  type ApiKeyStore,
  type Core,
  type CoreConfig,
  type Credential,
  type IssuedKey,
  type KeyPrincipal,
  type Organisation,
  type OrganisationStore,
  type Random,
  type Stores,
  type WebhookHostResolver,
  type WebhookSecretCipher,
} from '@cos/core';
import { FakeClock, InMemoryRateCounter, createInMemoryStore, createTestCore, seededRandom, type TestCore } from '@cos/core/testing';
import { storePorts } from '@cos/core/testing/contracts';

export interface Fixture extends TestCore {
  /** Every uuid handed out by the core's Random, in order. */
  readonly uuids: string[];
  org(slug: string, options?: { isSystem?: boolean; name?: string }): Promise<Organisation>;
  key(orgId: string, body?: Record<string, unknown>): Promise<IssuedKey>;
  principal(issued: IssuedKey): Promise<KeyPrincipal>;
  /** A standard organisation with one key and that key's principal. */
  tenant(slug: string): Promise<{ org: Organisation; issued: IssuedKey; principal: KeyPrincipal }>;
  /** A system organisation with one platform key and its principal. */
  platform(): Promise<{ org: Organisation; issued: IssuedKey; principal: KeyPrincipal }>;
}

/** A Random that records every uuid it hands out (ids must come from the Random port). */
export function recordingRandom(inner: Random, uuids: string[]): Random {
  return {
    bytes: (n) => inner.bytes(n),
    uuid: () => {
      const u = inner.uuid();
      uuids.push(u);
      return u;
    },
  };
}

export function fixture(options: { config?: Partial<CoreConfig>; seed?: number; webhookHosts?: WebhookHostResolver; webhookSecrets?: WebhookSecretCipher } = {}): Fixture {
  const uuids: string[] = [];
  const t = createTestCore({
    random: recordingRandom(seededRandom(options.seed ?? 42), uuids),
    ...(options.config !== undefined ? { config: options.config } : {}),
    ...(options.webhookHosts !== undefined ? { webhookHosts: options.webhookHosts } : {}),
    ...(options.webhookSecrets !== undefined ? { webhookSecrets: options.webhookSecrets } : {}),
  });
  const f: Fixture = {
    ...t,
    uuids,
    org: (slug, o = {}) =>
      t.core.organisations.create(OPERATOR, { name: o.name ?? `Org ${slug}`, slug }, { isSystem: o.isSystem === true }),
    key: (orgId, body = { label: 'test key' }) => t.core.apiKeys.issue(OPERATOR, orgId, body),
    principal: (issued) => t.core.authenticator.authenticate(`Bearer ${issued.rawKey}`),
    tenant: async (slug) => {
      const org = await f.org(slug);
      const issued = await f.key(org.id);
      return { org, issued, principal: await f.principal(issued) };
    },
    platform: async () => {
      const org = await f.org('platform', { isSystem: true, name: 'Platform' });
      const issued = await f.key(org.id);
      return { org, issued, principal: await f.principal(issued) };
    },
  };
  return f;
}

/** Awaits a promise expected to reject with a DomainError of `type`; returns that error. */
export async function rejectsWith<E extends DomainError>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => E,
): Promise<E> {
  let caught: unknown;
  try {
    await promise;
  } catch (e) {
    caught = e;
  }
  expect(caught, 'expected a rejection').to.be.instanceOf(type);
  return caught as E;
}

/** The fields of a ValidationError's details, for compact assertions. */
export function fieldsOf(error: DomainError): string[] {
  return error.details.map((d) => d.field);
}

/** An ApiKeyStore wrapper that counts calls before delegating to the real one. */
export class CountingApiKeyStore implements ApiKeyStore {
  calls = 0;
  constructor(private readonly inner: ApiKeyStore) {}
  insert(...a: Parameters<ApiKeyStore['insert']>) {
    this.calls++;
    return this.inner.insert(...a);
  }
  findById(...a: Parameters<ApiKeyStore['findById']>) {
    this.calls++;
    return this.inner.findById(...a);
  }
  findCredential(digest: string): Promise<Credential | null> {
    this.calls++;
    return this.inner.findCredential(digest);
  }
  list(...a: Parameters<ApiKeyStore['list']>) {
    this.calls++;
    return this.inner.list(...a);
  }
  countActive(...a: Parameters<ApiKeyStore['countActive']>) {
    this.calls++;
    return this.inner.countActive(...a);
  }
  revoke(...a: Parameters<ApiKeyStore['revoke']>) {
    this.calls++;
    return this.inner.revoke(...a);
  }
  shortenExpiry(...a: Parameters<ApiKeyStore['shortenExpiry']>) {
    this.calls++;
    return this.inner.shortenExpiry(...a);
  }
  update(...a: Parameters<ApiKeyStore['update']>) {
    this.calls++;
    return this.inner.update(...a);
  }
  recordUses(...a: Parameters<ApiKeyStore['recordUses']>) {
    this.calls++;
    return this.inner.recordUses(...a);
  }
  recordExposure(...a: Parameters<ApiKeyStore['recordExposure']>) {
    this.calls++;
    return this.inner.recordExposure(...a);
  }
  listCreatedBy(...a: Parameters<ApiKeyStore['listCreatedBy']>) {
    this.calls++;
    return this.inner.listCreatedBy(...a);
  }
  listExpiryNoticesDue(...a: Parameters<ApiKeyStore['listExpiryNoticesDue']>) {
    this.calls++;
    return this.inner.listExpiryNoticesDue(...a);
  }
  claimExpiryNotice(...a: Parameters<ApiKeyStore['claimExpiryNotice']>) {
    this.calls++;
    return this.inner.claimExpiryNotice(...a);
  }
}

/** The stores with one of them replaced. */
export function withStore<K extends keyof Stores>(stores: Stores, key: K, replacement: Stores[K]): Stores {
  return { ...stores, [key]: replacement } as Stores;
}

/**
 * A core over the in-memory adapters whose organisation store is `wrap(inner)`: a recording or
 * failing double around the real one.
 */
export function coreWithOrganisations(wrap: (inner: OrganisationStore) => OrganisationStore) {
  const store = createInMemoryStore();
  const clock = new FakeClock();
  const core = createCore({
    stores: withStore(storePorts(store), 'organisations', wrap(storePorts(store).organisations)),
    unitOfWork: store.unitOfWork,
    health: store.health,
    counter: new InMemoryRateCounter(clock),
    clock,
  });
  return { core, clock, store };
}

export const UNKNOWN_UUID = '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b';

/** The source address the use-case tests admit requests from. */
export const TEST_SOURCE = '203.0.113.9';

/** core.admission.admit() of a key that must be admitted: its Admitted answer. */
export async function admitted(core: Pick<Core, 'admission'>, authorization: string): Promise<Admitted> {
  const answer = await core.admission.admit(authorization, TEST_SOURCE);
  if (!answer.admitted) throw new Error(`expected the key to be admitted, got ${answer.refusal.message}`);
  return answer;
}

/** Counts findCredential; while held, reads happen at once but their answers wait for release(). */
export class GatedApiKeyStore extends CountingApiKeyStore {
  reads = 0;
  private held: (() => void)[] | null = null;
  override async findCredential(digest: string): Promise<Credential | null> {
    this.reads++;
    const answer = await super.findCredential(digest);
    const held = this.held;
    if (held !== null) await new Promise<void>((resolve) => held.push(resolve));
    return answer;
  }
  hold(): void {
    this.held = [];
  }
  release(): void {
    const held = this.held ?? [];
    this.held = null;
    for (const r of held) r();
  }
}
