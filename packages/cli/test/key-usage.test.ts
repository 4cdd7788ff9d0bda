/**
 * Usage counts through the real `cos-admin` binary on SQLite and Postgres: `serve` counts each
 * request of a key per hour (answered, or refused with 429) in memory and writes the counts with its
 * last-use writes, all of them on SIGTERM and all but at most one KEY_USAGE_FLUSH_MS on SIGKILL;
 * `key usage` shows them as a table with bars or as JSON, and refuses bad values with exit status 2;
 * USAGE_RETENTION's purge at start.
 */
import { expect } from 'chai';
import { createSqlStore } from '@cos/store-sql';
import { ensureBuilt, type KeyView, type ServeProcess } from './support/cli.js';
import { databaseTargets, suiteDatabase } from './support/databases.js';
import { loadConfig } from '../src/config.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

interface UsageList {
  data: Array<{ start: string; requests: number; rate_limited: number }>;
  meta: { next_cursor: null };
}

const sum = (u: UsageList): [number, number] => u.data.reduce<[number, number]>(([r, l], b) => [r + b.requests, l + b.rate_limited], [0, 0]);

before(async function () {
  this.timeout(180_000);
  await ensureBuilt();
});

describe('USAGE_RETENTION', () => {
  const load = (env: Record<string, string>) => loadConfig({ DATABASE_URL: 'sqlite::memory:', ...env }, { envFile: false });
  it('90d by default; a duration of the CLI grammar, more than zero; anything else is refused naming the variable', () => {
    expect(load({}).usageRetentionMs).to.equal(90 * DAY);
    expect(load({ USAGE_RETENTION: '12w' }).usageRetentionMs).to.equal(84 * DAY);
    expect(load({ USAGE_RETENTION: '36h' }).usageRetentionMs).to.equal(36 * HOUR);
    for (const bad of ['0d', '30', '90 days', '-1d', 'forever']) {
      expect(() => load({ USAGE_RETENTION: bad }), bad).to.throw(/^invalid configuration: USAGE_RETENTION must be more than zero and a duration/);
    }
  });
});

for (const target of databaseTargets()) {
  describe(`cos-admin usage counts on ${target.name}`, function () {
    this.timeout(90_000);
    const suite = suiteDatabase(target, { PORT: '0', RATE_LIMIT_PER_MINUTE: '1000000' });
    let orgId: string;

    before(async () => {
      await suite.json('migrate');
      orgId = (await suite.json<{ id: string }>('org', 'create', '--name', 'Acme', '--slug', 'acme')).id;
    });

    const usageOf = (keyId: string, ...args: string[]): Promise<UsageList> => suite.json<UsageList>('key', 'usage', orgId, keyId, ...args);
    const requester = (url: string, key: string) => async (): Promise<number> =>
      (await fetch(`${url}/v1/organisations/${orgId}`, { headers: { authorization: `Bearer ${key}` } })).status;

    it('serve counts answered requests and 429s per key; nothing is lost on SIGTERM; `key usage` shows them (table with bars, --json)', async () => {
      const k = await suite.json<KeyView>('key', 'issue', orgId, '--label', 'counted');
      const s = suite.serve([], { RATE_LIMIT_PER_MINUTE: '5' });
      const { url } = await s.listening();
      const get = requester(url, k.key!);
      const statuses: number[] = [];
      for (let i = 0; i < 9; i++) statuses.push(await get());
      expect((await requester(url, `svc_live_${'Q'.repeat(48)}`)()), 'an unknown key: counted for no key').to.equal(401);
      const answered = statuses.filter((c) => c !== 429).length;
      const limited = statuses.filter((c) => c === 429).length;
      expect(limited, `statuses ${statuses.join(',')}`).to.be.at.least(3); // at most 5 a minute, split by at most one minute boundary
      s.child.kill('SIGTERM');
      expect(await s.exited(), s.stdout() + s.stderr()).to.deep.equal({ code: 0, signal: null });

      const json = await usageOf(k.id);
      expect(json.meta).to.deep.equal({ next_cursor: null });
      expect(sum(json), 'every request of the key, written on SIGTERM').to.deep.equal([answered, limited]);
      const byDay = await usageOf(k.id, '--granularity', 'day', '--since', '7d');
      expect(sum(byDay)).to.deep.equal([answered, limited]);
      expect(byDay.data[byDay.data.length - 1]!.start).to.match(/^\d{4}-\d\d-\d\dT00:00:00\.000Z$/);

      const text = await suite.cli('key', 'usage', orgId, k.id);
      expect(text.code, text.stderr).to.equal(0);
      const lines = text.stdout.trimEnd().split('\n');
      expect(lines[0]).to.match(/^HOUR \(UTC\)\s+REQUESTS\s+RATE LIMITED$/);
      expect(lines[1]).to.match(/^\d{4}-\d\d-\d\d \d\d:00\s+\d+\s+\d+\s+[█░]+$/);
      expect(lines.at(-1)).to.match(/with traffic: \d+ requests? answered, \d+ rate limited/);
      const quiet = await suite.json<KeyView>('key', 'issue', orgId, '--label', 'quiet');
      expect((await suite.cli('key', 'usage', orgId, quiet.id)).stdout).to.equal('No requests in this range.\n');
      expect((await usageOf(quiet.id)).data).to.deep.equal([]);
    });

    it('SIGKILL under steady use: the counts written are at most one KEY_USAGE_FLUSH_MS behind the requests', async () => {
      const INTERVAL = 3_000;
      const k = await suite.json<KeyView>('key', 'issue', orgId, '--label', 'killed');
      const s: ServeProcess = suite.serve([], { KEY_USAGE_FLUSH_MS: String(INTERVAL) });
      const { url } = await s.listening();
      const get = requester(url, k.key!);
      const done: number[] = [];
      const until = Date.now() + 2 * INTERVAL + 500;
      while (Date.now() < until) {
        expect(await get()).to.equal(200);
        done.push(Date.now());
        await new Promise((r) => setTimeout(r, 50));
      }
      const killedAt = Date.now();
      s.child.kill('SIGKILL');
      expect((await s.exited()).signal).to.equal('SIGKILL');
      const [stored, limited] = sum(await usageOf(k.id));
      expect(limited).to.equal(0);
      expect(stored, 'never more than were made').to.be.at.most(done.length);
      expect(stored, 'every request older than one interval was written').to.be.at.least(done.filter((t) => t <= killedAt - INTERVAL).length);
      expect(stored, 'written during the run, not only at its start').to.be.above(done.filter((t) => t <= done[0]! + 1_000).length);
    });

    it('key usage refuses bad values with exit status 2 before opening anything, and a range the core refuses naming the flag', async () => {
      const k = await suite.json<KeyView>('key', 'issue', orgId, '--label', 'flags');
      const week = await suite.cli('key', 'usage', orgId, k.id, '--granularity', 'week');
      expect(week.code).to.equal(2);
      expect(week.stderr).to.match(/option '--granularity <hour\|day>' argument 'week' is invalid\. Use hour or day\./);
      const since = await suite.cli('key', 'usage', orgId, k.id, '--since', 'yesterday');
      expect(since.code).to.equal(2);
      expect(since.stderr).to.match(/option '--since <when>' argument 'yesterday' is invalid/);
      const long = await suite.cli('key', 'usage', orgId, k.id, '--since', '60d');
      expect(long.code, long.stderr).to.equal(2);
      expect(long.stderr).to.equal('cos-admin: invalid input: --since: must be at most 31 days before until with granularity hour\n');
      const future = await suite.cli('key', 'usage', orgId, k.id, '--since', '2999-01-01');
      expect(future.code).to.equal(2);
      expect((await suite.cli('key', 'usage', orgId, k.id, '--since', '60d', '--granularity', 'day')).code).to.equal(0);
      const missing = await suite.cli('key', 'usage', orgId, '3f1c9a52-8d4e-4b7a-9c21-5e6f7a8b9c0d');
      expect(missing.code).to.equal(1);
      expect(missing.stderr).to.match(/not found/i);
    });

    it('serve deletes the hours older than USAGE_RETENTION at start and keeps the others', async () => {
      const k = await suite.json<KeyView>('key', 'issue', orgId, '--label', 'retained');
      const store = createSqlStore({ databaseUrl: suite.db.databaseUrl });
      const now = Date.now();
      const hourAgo = (ms: number): Date => new Date(now - ms - ((now - ms) % HOUR));
      try {
        await store.stores.usage.add([
          { keyId: k.id, hourStart: hourAgo(40 * DAY), requests: 7, rateLimited: 1 },
          { keyId: k.id, hourStart: hourAgo(10 * DAY), requests: 3, rateLimited: 0 },
        ]);
      } finally {
        await store.close();
      }
      expect(sum(await usageOf(k.id, '--granularity', 'day', '--since', '60d'))).to.deep.equal([10, 1]);
      const s = suite.serve([], { USAGE_RETENTION: '30d' });
      await s.listening();
      const line = () => s.logLines().find((l) => l['msg'] === 'purged usage counts past their retention');
      for (let i = 0; i < 100 && line() === undefined; i += 1) await new Promise((r) => setTimeout(r, 50));
      expect(line()).to.deep.include({ purged: 1 });
      s.child.kill('SIGTERM');
      await s.exited();
      const left = await usageOf(k.id, '--granularity', 'day', '--since', '60d');
      expect(left.data).to.deep.equal([{ start: new Date(hourAgo(10 * DAY).getTime() - (hourAgo(10 * DAY).getTime() % DAY)).toISOString(), requests: 3, rate_limited: 0 }]);
    });
  });
}
