/**
 * Soak: SOAK_SECONDS (default 30 here in the normal run; `pnpm soak` sets 300) of mixed
 * traffic at a steady rate against the whole stack on Postgres + Redis: reads, writes (renames,
 * issuances, organisation creations), revocations, and a flooding tenant that draws 429s.
 *   - zero 5xx and zero transport errors; 429s only for the flooding tenant (per-organisation counters, C-50);
 *   - live heap and RSS grow less than 10 % between the end of warm-up and the end of the run;
 *   - every acknowledged write is present afterwards: organisations, keys (active unless revoked),
 *     revocations with exactly one api_key_revoked each, issuances with one api_key_issued each.
 */
import { expect } from 'chai';
import { OPERATOR, type AuditEntry } from '@cos/core';
import { intFromEnv, postgresUrl, redisUrl } from '../support/env.js';
import { createSchema, freshSchemaName } from '../support/postgres.js';
import { startContainerStack, postgresUrlForSchema, type ContainerStack } from '../support/container-stack.js';
import { createTenant, uniqueSlug, type Tenant } from '../support/stack.js';
import { RedisServer } from '@cos/test-support/redis-server';
import { CountingLogger } from '../support/counting-logger.js';
import { runLoad, type Planned, type Sample } from '../support/load.js';
import { median, sampleMemory, type MemorySample } from '../support/memory.js';
import { FUZZ_SEED } from '../support/fuzz-seed.js';

const SECONDS = intFromEnv('SOAK_SECONDS', 30);
const RATE = intFromEnv('SOAK_RATE', 70);
/**
 * The per-organisation limit: above what the busiest well-behaved organisation (the platform, 1/16
 * of the arrivals) sends in any minute of the run, below what the flooding one (5/16) sends in half
 * the run, so the flood meets 429s in every run however the run straddles minute boundaries.
 */
const LIMIT = Math.ceil((RATE / 16) * Math.min(60, SECONDS) * 1.15 + 5);
const TENANTS = 10;
const WARMUP_MS = Math.max(10_000, SECONDS * 1000 * 0.3);
const WINDOW_MS = Math.max(4_500, Math.min(20_000, SECONDS * 1000 * 0.15));

/** mulberry32: a small seeded PRNG so a run's traffic mix is reproducible from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** What the service acknowledged (2xx); the soak checks all of it is there at the end. */
class Ledger {
  readonly organisations = new Map<string, string>();
  readonly keys = new Map<string, string>();
  readonly revoked = new Set<string>();
  readonly names = new Map<string, Set<string>>();
  /** Issued and not yet revoked per tenant (candidates for revocation). */
  readonly revocable = new Map<string, string[]>();
}

describe(`system: soak, ${SECONDS} s of mixed traffic at ${RATE} req/s on Postgres + Redis (C-17, C-50..C-54)`, function () {
  this.timeout(SECONDS * 1000 + 180_000);
  const databaseUrl = postgresUrl();
  let stack: ContainerStack;
  let logger: CountingLogger;
  let dropSchema: (() => Promise<void>) | undefined;
  let redis: RedisServer | undefined;
  let tenants: Tenant[];
  let flood: Tenant;
  let platform: Tenant;

  before(async function () {
    if (databaseUrl === undefined) {
      this.skip();
      return;
    }
    let redisAt = redisUrl();
    if (redisAt === undefined) {
      redis = await RedisServer.start();
      redisAt = redis.url;
    }
    const schema = freshSchemaName('soak');
    dropSchema = await createSchema(databaseUrl, schema);
    logger = new CountingLogger();
    stack = await startContainerStack(
      {
        DATABASE_URL: postgresUrlForSchema(databaseUrl, schema),
        REDIS_URL: redisAt,
        RATE_LIMIT_PER_MINUTE: String(LIMIT),
        UNAUTH_RATE_LIMIT_PER_MINUTE: '1000000',
        LOG_LEVEL: 'info',
      },
      logger,
      // The soak's subject is leaks, 429s and acknowledged writes, not the store's 2 s answer budget
      // (C-17, tested by the store and outage suites): on a machine running other test files beside
      // this one a rename or issuance waited past 2 s for the CPU and was answered 503. A budget a
      // loaded machine does not reach (below the client's 15 s) keeps every 5xx a real fault.
      { statementTimeoutMs: 10_000 },
    );
    platform = await createTenant(stack.core, 'soak-platform', { system: true });
    flood = await createTenant(stack.core, 'soak-flood');
    tenants = [];
    for (let i = 0; i < TENANTS; i += 1) tenants.push(await createTenant(stack.core, `soak-${i}`));
  });

  after(async () => {
    await stack?.close();
    await redis?.kill();
    await dropSchema?.();
  });

  it(`soak: zero 5xx, 429s only for the flooding tenant, heap and RSS growth under 10 % after warm-up, every acknowledged write present`, async () => {
    const random = prng(FUZZ_SEED);
    const ledger = new Ledger();
    for (const t of tenants) {
      ledger.revocable.set(t.id, []);
      ledger.names.set(t.id, new Set([`soak-${tenants.indexOf(t)} organisation`]));
    }
    let platformCursor: string | null = null;
    const auth = (t: Tenant): Record<string, string> => ({ authorization: `Bearer ${t.key}` });
    const jsonAuth = (t: Tenant): Record<string, string> => ({ ...auth(t), 'content-type': 'application/json' });

    const tenantRequest = (t: Tenant, i: number): Planned => {
      const roll = random();
      const base = `/v1/organisations/${t.id}`;
      const mine = ledger.revocable.get(t.id) as string[];
      if (roll < 0.3) return { label: 'get org', request: { method: 'GET', path: base, headers: auth(t) } };
      if (roll < 0.4) return { label: 'list keys', request: { method: 'GET', path: `${base}/api-keys?limit=5`, headers: auth(t) } };
      if (roll < 0.5 && mine.length > 0)
        return { label: 'get key', request: { method: 'GET', path: `${base}/api-keys/${mine[Math.floor(random() * mine.length)]}`, headers: auth(t) } };
      if (roll < 0.55) return { label: 'list members', request: { method: 'GET', path: `${base}/members`, headers: auth(t) } };
      if (roll < 0.7) {
        const name = `renamed ${i}`;
        return {
          label: 'rename',
          request: { method: 'PATCH', path: base, headers: jsonAuth(t), body: JSON.stringify({ name }) },
          onResponse: (r) => {
            if (r.status === 200) ledger.names.get(t.id)?.add(name);
          },
        };
      }
      if (roll < 0.85 || mine.length === 0)
        return {
          label: 'issue',
          request: { method: 'POST', path: `${base}/api-keys`, headers: jsonAuth(t), body: JSON.stringify({ label: `soak ${i}` }) },
          onResponse: (r) => {
            if (r.status !== 201) return;
            const id = r.json<{ id: string }>().id;
            ledger.keys.set(id, t.id);
            mine.push(id);
          },
        };
      const victim = mine.splice(Math.floor(random() * mine.length), 1)[0] as string;
      return {
        label: 'revoke',
        request: { method: 'DELETE', path: `${base}/api-keys/${victim}`, headers: auth(t) },
        onResponse: (r) => {
          if (r.status === 204) ledger.revoked.add(victim);
          else mine.push(victim);
        },
      };
    };

    const platformRequest = (i: number): Planned => {
      if (random() < 0.5) {
        const slug = uniqueSlug(`soak-new-${i}`);
        return {
          label: 'create org',
          request: { method: 'POST', path: '/v1/organisations', headers: jsonAuth(platform), body: JSON.stringify({ name: `Soak ${i}`, slug }) },
          onResponse: (r) => {
            if (r.status === 201) ledger.organisations.set(r.json<{ id: string }>().id, slug);
          },
        };
      }
      const cursor: string | null = platformCursor;
      return {
        label: 'list orgs',
        request: { method: 'GET', path: `/v1/organisations?limit=20${cursor === null ? '' : `&cursor=${cursor}`}`, headers: auth(platform) },
        onResponse: (r) => {
          if (r.status === 200) platformCursor = r.json<{ meta: { next_cursor: string | null } }>().meta.next_cursor;
        },
      };
    };

    // Every 16 arrivals: 9 tenant requests (round robin), 1 platform, 1 health, 5 from the flooding tenant.
    let tenantTurn = 0;
    const next = (i: number): Planned => {
      const slot = i % 16;
      if (slot < 9) {
        const t = tenants[tenantTurn++ % tenants.length] as Tenant;
        return tenantRequest(t, i);
      }
      if (slot === 9) return platformRequest(i);
      if (slot === 10) return { label: 'health', request: { method: 'GET', path: '/v1/health' } };
      return { label: 'flood', request: { method: 'GET', path: `/v1/organisations/${flood.id}`, headers: auth(flood) } };
    };

    const statusCounts = new Map<string, number>();
    const failures: string[] = [];
    const latencies: number[] = [];
    let limitedNonFlood = 0;
    const onSample = (s: Sample): void => {
      const key = `${s.label}:${s.status}`;
      statusCounts.set(key, (statusCounts.get(key) ?? 0) + 1);
      if (latencies.length < 200_000) latencies.push(s.elapsedMs);
      if (s.status === 0 || s.status >= 500) {
        if (failures.length < 20) failures.push(`${s.label} ${s.status} ${s.error ?? ''} at ${Math.round(s.at)} ms`);
      }
      if (s.status === 429 && s.label !== 'flood') limitedNonFlood += 1;
    };

    // Memory: one sample every 2 s (after a full GC, which pauses the service briefly), beside the load.
    const memory: MemorySample[] = [];
    const started = performance.now();
    const sampler = setInterval(() => memory.push(sampleMemory(performance.now() - started)), 2000);
    let result;
    try {
      result = await runLoad({ client: stack.client, ratePerSecond: RATE, durationMs: SECONDS * 1000, next, onSample, origin: started }, false);
    } finally {
      clearInterval(sampler);
    }
    memory.push(sampleMemory(performance.now() - started));

    const counts = Object.fromEntries([...statusCounts.entries()].sort());
    const sorted = [...latencies].sort((a, b) => a - b);
    const p = (q: number): number => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0);
    const baseWindow = memory.filter((m) => m.at >= WARMUP_MS && m.at < WARMUP_MS + WINDOW_MS);
    const endWindow = memory.filter((m) => m.at >= SECONDS * 1000 - WINDOW_MS);
    const growth = (pick: (m: MemorySample) => number): number => median(endWindow.map(pick)) / median(baseWindow.map(pick)) - 1;
    const heapGrowth = growth((m) => m.heapUsed);
    const rssGrowth = growth((m) => m.rss);
    console.log(
      `      soak ${SECONDS} s: ${result.sent} requests (${result.skipped} skipped), p50 ${p(0.5)} ms, p99 ${p(0.99)} ms, max ${p(1)} ms; ` +
        `heap ${(median(baseWindow.map((m) => m.heapUsed)) / 2 ** 20).toFixed(1)} -> ${(median(endWindow.map((m) => m.heapUsed)) / 2 ** 20).toFixed(1)} MiB (${(heapGrowth * 100).toFixed(1)} %), ` +
        `rss ${(median(baseWindow.map((m) => m.rss)) / 2 ** 20).toFixed(1)} -> ${(median(endWindow.map((m) => m.rss)) / 2 ** 20).toFixed(1)} MiB (${(rssGrowth * 100).toFixed(1)} %); ` +
        `writes: ${ledger.organisations.size} organisations, ${ledger.keys.size} keys, ${ledger.revoked.size} revocations`,
    );
    console.log(`      ${JSON.stringify(counts)}`);

    expect(failures, '5xx or transport errors').to.deep.equal([]);
    expect(result.skipped, 'arrivals skipped for too many requests in flight').to.equal(0);
    expect(logger.counts.error, JSON.stringify(logger.notable)).to.equal(0);
    expect(counts['flood:429'] ?? 0, '429s drawn by the flooding tenant').to.be.greaterThan(0);
    expect(limitedNonFlood, '429s for tenants under their limit (C-50: counters are per organisation)').to.equal(0);
    expect(ledger.keys.size, 'issuances acknowledged').to.be.greaterThan(0);
    expect(ledger.revoked.size, 'revocations acknowledged').to.be.greaterThan(0);
    expect(ledger.organisations.size, 'organisations acknowledged').to.be.greaterThan(0);
    expect(baseWindow.length).to.be.greaterThan(0);
    expect(endWindow.length).to.be.greaterThan(0);
    expect(heapGrowth, 'live heap growth after warm-up').to.be.lessThan(0.1);
    expect(rssGrowth, 'RSS growth after warm-up').to.be.lessThan(0.1);

    // Every acknowledged write is there.
    for (const [id, slug] of ledger.organisations) expect((await stack.core.organisations.get(OPERATOR, id)).slug).to.equal(slug);
    for (const t of tenants) {
      const org = await stack.core.organisations.get(OPERATOR, t.id);
      expect([...(ledger.names.get(t.id) ?? [])], 'final name is an acknowledged one').to.include(org.name);
    }
    const stored = new Map<string, { revokedAt: Date | null }>();
    for (const t of tenants) {
      let cursor: string | undefined;
      do {
        const page = await stack.core.apiKeys.list(OPERATOR, t.id, { limit: 100, ...(cursor !== undefined ? { cursor } : {}) });
        for (const k of page.items) stored.set(k.id, { revokedAt: k.revokedAt });
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
    }
    const missing = [...ledger.keys.keys()].filter((id) => !stored.has(id));
    expect(missing, 'acknowledged keys missing').to.deep.equal([]);
    const wrongState = [...ledger.keys.keys()].filter((id) => (stored.get(id)?.revokedAt !== null) !== ledger.revoked.has(id));
    expect(wrongState, 'keys whose revoked state differs from what was acknowledged').to.deep.equal([]);

    const events = new Map<string, number>();
    for (const t of tenants) {
      let cursor: string | undefined;
      do {
        const page = await stack.core.audit.list(OPERATOR, { org: t.id, limit: 100, ...(cursor !== undefined ? { cursor } : {}) });
        for (const e of page.items as readonly AuditEntry[]) if (e.keyId !== null) events.set(`${e.kind}:${e.keyId}`, (events.get(`${e.kind}:${e.keyId}`) ?? 0) + 1);
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
    }
    const badIssued = [...ledger.keys.keys()].filter((id) => events.get(`api_key_issued:${id}`) !== 1);
    const badRevoked = [...ledger.revoked].filter((id) => events.get(`api_key_revoked:${id}`) !== 1);
    expect(badIssued, 'keys without exactly one api_key_issued').to.deep.equal([]);
    expect(badRevoked, 'revocations without exactly one api_key_revoked (C-40)').to.deep.equal([]);
  });
});
