/**
 * An organisation's plan across two real `cos-admin serve` processes on one Postgres and one Redis
 * (a redis-server this test spawns), each with the credential cache on (C-240, C-242): B answers the
 * organisation's key from its warm cache; a plan set at A applies to B's next request, which reports
 * the new X-RateLimit-Limit and is limited by it, and a plan set at B to A's; no restart, no expiry.
 * An organisation at limit N gets exactly N requests of a minute through the two instances together
 * (one Redis count), then 429 with the v1 body. A key's own limit (C-290, C-292) changed at one
 * instance applies to the other's next request, and a key limited to 60 under an organisation at
 * 1,000 gets exactly 60 requests of a minute through both instances at once, then 429 "key", its
 * refusals leaving the organisation's window alone.
 */
import { expect } from 'chai';
import type { TcpProxy } from '@cos/test-support/tcp-proxy';
import { cliJson, type Env } from '../../../cli/test/support/cli.js';
import { Client, type Incoming } from '../support/http.js';
import { sleep } from '../support/free-port.js';
import { startServeInstances, type ServeInstances } from '../support/serve-instances.js';
import { storeReadsDuring } from '../support/store-reads.js';

/** Waits, when needed, for the next UTC minute, so that what follows runs in one window (at most `seconds` of it used). */
async function windowWithRoom(seconds: number): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute < 60_000 - seconds * 1000) return;
  await sleep(60_000 - intoMinute + 200);
}

const DEFAULT_LIMIT = 100_000;

describe('system: an organisation\'s plan across two serve instances with warm credential caches (C-240, C-242)', function () {
  this.timeout(180_000);
  let fx: ServeInstances;
  let pgProxy: TcpProxy;
  /** The operator's environment and working directory (the instances'). */
  let env: Env;
  let work: { readonly dir: string };
  let a: Client;
  let b: Client;
  let platformKey: string;

  before(async function () {
    fx = await startServeInstances(this, {
      redis: 'server',
      env: { RATE_LIMIT_PER_MINUTE: String(DEFAULT_LIMIT) },
      async seed(ground) {
        const system = await ground.cli<{ id: string }>(['org', 'create', '--name', 'Platform', '--slug', 'platform-plan', '--system']);
        platformKey = (await ground.cli<{ key: string }>(['key', 'issue', system.id, '--label', 'platform'])).key;
      },
      // B reaches Postgres through a proxy that sees its statements: the test can see B serve from its cache.
      instances: [{}, { postgresProxy: true }],
    });
    ({ env } = fx);
    work = { dir: fx.dir };
    a = fx.instances[0]!.client;
    b = fx.instances[1]!.client;
    pgProxy = fx.instances[1]!.pgProxy;
  });

  after(() => fx?.close());

  async function organisation(slug: string): Promise<{ orgId: string; key: string }> {
    const org = await cliJson<{ id: string }>(['org', 'create', '--name', slug, '--slug', slug], env, work.dir);
    const key = (await cliJson<{ key: string }>(['key', 'issue', org.id, '--label', 'owner'], env, work.dir)).key;
    return { orgId: org.id, key };
  }
  const getOrg = (c: Client, orgId: string, key: string) => c.call('GET', `/v1/organisations/${orgId}`, { key, timeoutMs: 5_000 });
  /** PUT …/rate-limit with the platform key, sent again while its fence is refused (503: nothing changed). */
  async function setPlan(c: Client, orgId: string, perMinute: number | null): Promise<Incoming> {
    for (let attempt = 0; ; attempt++) {
      const r = await c.call('PUT', `/v1/organisations/${orgId}/rate-limit`, { key: platformKey, body: { requests_per_minute: perMinute }, timeoutMs: 5_000 });
      if (r.status !== 503 || attempt === 5) return r;
      await sleep(50 * 2 ** attempt);
    }
  }
  const limitOf = (r: Incoming): number => Number(r.headers.get('x-ratelimit-limit'));

  it('C-242: a plan set at A is reported and enforced by B\'s next request while B\'s cache is warm; raised at B, A\'s next request is let in under it; back to the default at A, B reports the default', async () => {
    const { orgId, key } = await organisation('plan-warm');
    // A new organisation is "not settled" in Redis for the change bound (10 s): nothing is cached before.
    for (const c of [a, b]) expect((await getOrg(c, orgId, key)).status).to.equal(200);
    await sleep(10_500);
    await windowWithRoom(30);
    for (const c of [a, b]) for (let n = 0; n < 3; n++) expect(limitOf(await getOrg(c, orgId, key))).to.equal(DEFAULT_LIMIT);
    const cached = await storeReadsDuring(pgProxy, async () => {
      for (let n = 0; n < 5; n++) expect((await getOrg(b, orgId, key)).status).to.equal(200);
    });
    expect(cached, 'B answers the key from its cache before the change').to.deep.equal([]);

    const lowered = await setPlan(a, orgId, 3);
    expect(lowered.status, lowered.text).to.equal(200);
    expect(lowered.json()).to.deep.equal({ requests_per_minute: 3, source: 'organisation' });
    // At least 11 requests of this minute are counted already: the next one, at B, is over 3.
    const refused = await getOrg(b, orgId, key);
    expect(refused.status, refused.text).to.equal(429);
    expect(limitOf(refused)).to.equal(3);
    expect(Object.keys(refused.json<Record<string, unknown>>()).sort()).to.deep.equal(['detail', 'instance', 'retry_after', 'status', 'svc_error_code', 'title', 'type']);
    expect(limitOf(await getOrg(a, orgId, key))).to.equal(3);

    const raised = await setPlan(b, orgId, 1_000);
    expect(raised.status, raised.text).to.equal(200);
    const atA = await getOrg(a, orgId, key);
    expect(atA.status, 'the raised plan lets the organisation in at once').to.equal(200);
    expect(limitOf(atA)).to.equal(1_000);
    const atB = await getOrg(b, orgId, key);
    expect(atB.status).to.equal(200);
    expect(limitOf(atB)).to.equal(1_000);
    expect(Number(atB.headers.get('x-ratelimit-remaining'))).to.be.within(1_000 - 30, 1_000 - 12);

    expect((await setPlan(a, orgId, null)).json()).to.deep.equal({ requests_per_minute: DEFAULT_LIMIT, source: 'default' });
    expect(limitOf(await getOrg(b, orgId, key))).to.equal(DEFAULT_LIMIT);
    for (const c of [a, b]) {
      const read = await c.call('GET', `/v1/organisations/${orgId}/rate-limit`, { key, timeoutMs: 5_000 });
      expect(read.json()).to.deep.equal({ requests_per_minute: DEFAULT_LIMIT, source: 'default' });
    }
    // The cache fills again under the new state: B serves the key without a store read.
    for (let n = 0; n < 3; n++) await getOrg(b, orgId, key);
    expect(await storeReadsDuring(pgProxy, async () => void (await getOrg(b, orgId, key)))).to.deep.equal([]);
  });

  it('C-240: an organisation at limit 10 gets exactly 10 requests of a minute through both instances together, then 429 on both', async () => {
    const { orgId, key } = await organisation('plan-exact');
    expect((await setPlan(a, orgId, 10)).status).to.equal(200);
    await windowWithRoom(20);
    const answers: Incoming[] = [];
    for (let n = 0; n < 14; n++) answers.push(await getOrg(n % 2 === 0 ? a : b, orgId, key));
    expect(new Set(answers.map((r) => r.headers.get('x-ratelimit-reset'))).size, 'one window').to.equal(1);
    expect(answers.map((r) => r.status)).to.deep.equal([...Array<number>(10).fill(200), 429, 429, 429, 429]);
    expect(answers.map(limitOf)).to.deep.equal(Array<number>(14).fill(10));
    expect(answers.slice(0, 10).map((r) => Number(r.headers.get('x-ratelimit-remaining')))).to.deep.equal([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
  });

  /** PATCH …/api-keys/{key_id} with the organisation's own key, sent again while its fence is refused (503: nothing changed). */
  async function setKeyLimit(c: Client, orgId: string, ownerKey: string, keyId: string, perMinute: number | null): Promise<Incoming> {
    for (let attempt = 0; ; attempt++) {
      const r = await c.call('PATCH', `/v1/organisations/${orgId}/api-keys/${keyId}`, { key: ownerKey, body: { rate_limit_per_minute: perMinute }, timeoutMs: 5_000 });
      if (r.status !== 503 || attempt === 5) return r;
      await sleep(50 * 2 ** attempt);
    }
  }
  /** A key of `orgId` with its own limit, issued by the operator. */
  const limitedKey = (orgId: string, perMinute: number): Promise<{ id: string; key: string }> =>
    cliJson<{ id: string; key: string }>(['key', 'issue', orgId, '--label', 'limited', '--rate-limit', String(perMinute)], env, work.dir);

  it("C-290, C-292: a key limit lowered at B refuses A's next request with that key while A's cache is warm; raised at A, B's next request is let in under it", async () => {
    const { orgId, key: owner } = await organisation('key-limit-warm');
    const limited = await limitedKey(orgId, 50);
    for (const c of [a, b]) expect((await getOrg(c, orgId, limited.key)).status).to.equal(200);
    await sleep(10_500);
    await windowWithRoom(30);
    for (const c of [a, b]) for (let n = 0; n < 3; n++) expect(limitOf(await getOrg(c, orgId, limited.key))).to.equal(50);
    const cached = await storeReadsDuring(pgProxy, async () => {
      for (let n = 0; n < 3; n++) expect((await getOrg(a, orgId, limited.key)).status).to.equal(200);
    });
    expect(cached, 'A answers the key from its cache before the change').to.deep.equal([]);

    const lowered = await setKeyLimit(b, orgId, owner, limited.id, 2);
    expect(lowered.status, lowered.text).to.equal(200);
    expect(lowered.json<{ rate_limit_per_minute: number }>().rate_limit_per_minute).to.equal(2);
    // At least 9 of the key's requests are counted in this minute: the next one, at A, is over 2.
    const refused = await getOrg(a, orgId, limited.key);
    expect(refused.status, refused.text).to.equal(429);
    expect(refused.json<{ limit_scope: string }>().limit_scope).to.equal('key');
    expect(limitOf(refused)).to.equal(2);
    const other = await getOrg(b, orgId, owner);
    expect(other.status, 'the organisation itself is far from its limit').to.equal(200);

    const raised = await setKeyLimit(a, orgId, owner, limited.id, 1_000);
    expect(raised.status, raised.text).to.equal(200);
    const atB = await getOrg(b, orgId, limited.key);
    expect(atB.status, 'the raised limit lets the key in at once').to.equal(200);
    expect(Number(atB.headers.get('x-ratelimit-remaining')), 'the organisation (100,000) has more left than the key (1,000)').to.be.within(1_000 - 20, 1_000 - 10);
    expect(limitOf(atB)).to.equal(1_000);

    expect((await setKeyLimit(b, orgId, owner, limited.id, null)).status).to.equal(200);
    expect(limitOf(await getOrg(a, orgId, limited.key)), "the organisation's window alone").to.equal(DEFAULT_LIMIT);
  });

  it('C-292, C-293: a key limited to 60 under an organisation at 1,000 gets exactly 60 requests of a minute through both instances at once, then 429 "key"; the organisation counted only those 60', async () => {
    const { orgId, key: owner } = await organisation('key-limit-exact');
    expect((await setPlan(a, orgId, 1_000)).status).to.equal(200);
    const limited = await limitedKey(orgId, 60);
    await windowWithRoom(20);
    // 80 requests in bursts of 16 at once, half at each instance: each instance batches its turn's requests.
    const answers: Incoming[] = [];
    for (let burst = 0; burst < 5; burst++) {
      answers.push(...(await Promise.all(Array.from({ length: 16 }, (_, n) => getOrg(n % 2 === 0 ? a : b, orgId, limited.key)))));
    }
    const after = await getOrg(b, orgId, owner);
    const resets = new Set([...answers, after].map((r) => r.headers.get('x-ratelimit-reset')));
    expect(resets.size, 'one window').to.equal(1);
    expect(answers.filter((r) => r.status === 200)).to.have.length(60);
    const refused = answers.filter((r) => r.status !== 200);
    expect(refused.map((r) => r.status)).to.deep.equal(Array<number>(20).fill(429));
    expect(refused.map((r) => r.json<{ limit_scope: string }>().limit_scope)).to.deep.equal(Array<string>(20).fill('key'));
    expect(answers.map(limitOf)).to.deep.equal(Array<number>(80).fill(60));
    const remaining = answers.filter((r) => r.status === 200).map((r) => Number(r.headers.get('x-ratelimit-remaining')));
    expect(remaining.sort((x, y) => y - x), 'each count of the key window handed out once').to.deep.equal(Array.from({ length: 60 }, (_, i) => 59 - i));
    // The plan's PUT and the issue are not requests of the organisation; its window: 60 + this one.
    expect(after.status).to.equal(200);
    expect(Number(after.headers.get('x-ratelimit-remaining')), 'refusals by the key left the organisation alone').to.equal(1_000 - 61);
  });
});
