/**
 * The credential cache of a SQLite file (sqlite/reader.ts `cached()`, sqlite/wal-index.ts): outside a unit of
 * work `apiKeys.findCredential` answers from results the read-only connection keeps for as long as no
 * transaction has committed to the file, from any connection of any process. Validity is the
 * WAL-index header at the start of `<db>-shm` (two equal 48-byte copies): equal headers, no commit.
 *
 * C-36 (no cache may serve a key after its revocation) is checked through the cache: every lookup is
 * made after the previous one was served from the cache (the same object comes back: a read through
 * the pool or the read connection builds a new one), then a write through the same store, a unit of
 * work, a second store in this process or another process must show on the very next lookup.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { endianness } from 'node:os';
import type { Credential } from '@cos/core';
import { seededRandom } from '@cos/core/testing';
import type { SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import { READ_CACHE_MAX_ENTRIES, SqliteReadConnection } from '../src/sqlite/reader.js';
import { WalIndexWatch } from '../src/sqlite/wal-index.js';
import { at, issuedKey, organisation } from './support/fixtures.js';
import { SqliteChild } from './support/sqlite-child.js';
import { useSqliteFiles } from './support/sqlite-files.js';
import { applyWrite, keyToJson, type WriteCommand } from './support/store-writes.js';
import { storePorts } from '@cos/core/testing/contracts';

const WAL_INDEX_VERSION = 3007000;

/** A plain better-sqlite3 connection (no types are installed for it): a writer whose commit is synchronous. */
interface PlainDatabase {
  prepare(sql: string): { run(...bindings: unknown[]): unknown };
  close(): void;
}
const PlainDatabase = createRequire(import.meta.url)('better-sqlite3') as new (filename: string) => PlainDatabase;

/** A fresh read of the credential, bypassing the read connection and its cache (the unit of work's own connection). */
function uncached(store: SqlStore, digest: string): Promise<Credential | null> {
  return store.unitOfWork.run((tx) => tx.apiKeys.findCredential(digest));
}

/** The header as of now (read() answers a view into the watch's buffer). */
function headerNow(watch: WalIndexWatch): Buffer {
  const header = watch.read();
  expect(header, 'a consistent WAL-index header').to.not.equal(null);
  return Buffer.from(header!);
}

describe('SQLite file: the credential cache of the read connection (WAL-index header)', function () {
  this.timeout(30_000);
  const { file: scratchFile, storeOn } = useSqliteFiles('cos-store-sql-cache-');
  let n = 0;
  const children: SqliteChild[] = [];
  const closers: Array<() => void> = [];
  afterEach(() => {
    for (const close of closers.splice(0)) close();
    for (const child of children.splice(0)) child.kill();
  });

  function child(args: readonly string[]): SqliteChild {
    const c = new SqliteChild(args);
    children.push(c);
    return c;
  }

  function watchOf(file: string): WalIndexWatch {
    const watch = new WalIndexWatch(file);
    closers.push(() => watch.close());
    return watch;
  }

  /**
   * A migrated file with an organisation and one active key, and a store whose read connection is
   * open, with the key's credential in its cache (the second lookup came back as the first's object).
   */
  async function fixture() {
    n += 1;
    const file = scratchFile(`cache-${n}.sqlite`);
    const url = `sqlite:${file}`;
    const store = storeOn(url);
    await store.migrate();
    const org = organisation();
    await store.stores.organisations.create(org);
    const { key } = issuedKey(org.id);
    await store.stores.apiKeys.insert(key);
    // The first lookup goes through the pool and opens the read connection; the next one reads there and keeps it.
    await store.stores.apiKeys.findCredential(key.digest);
    const cached = await cachedCredential(store, key.digest);
    expect(cached.key).to.deep.equal(key);
    expect(cached.organisation).to.deep.equal(org);
    return { file, url, store, org, key };
  }

  /** Looks `digest` up twice; the second answer must be the first's object (served from the cache). */
  async function cachedCredential(store: SqlStore, digest: string): Promise<Credential> {
    const first = await store.stores.apiKeys.findCredential(digest);
    expect(first, 'a known digest').to.not.equal(null);
    expect(await store.stores.apiKeys.findCredential(digest), 'served from the cache while nothing committed').to.equal(first);
    return first!;
  }

  describe('WalIndexWatch', () => {
    it('C-36: on a migrated WAL file with a store open, open() is true and read() is one consistent 48-byte header; lookups and a read-only unit of work leave it unchanged', async () => {
      const { file, store, org, key } = await fixture();
      const watch = watchOf(file);
      expect(watch.read(), 'nothing read before open()').to.equal(null);
      expect(watch.open()).to.equal(true);
      const before = headerNow(watch);
      expect(before.length).to.equal(48);
      expect(endianness() === 'LE' ? before.readUInt32LE(0) : before.readUInt32BE(0), 'iVersion').to.equal(WAL_INDEX_VERSION);
      expect(before[12], 'isInit').to.equal(1);
      expect(readFileSync(`${file}-shm`).subarray(0, 48).equals(before), 'the first copy in <db>-shm').to.equal(true);

      for (let i = 0; i < 3; i += 1) {
        await store.stores.apiKeys.findCredential(key.digest);
        await store.stores.apiKeys.findCredential(issuedKey(org.id).key.digest);
        await store.stores.organisations.findById(org.id);
        await store.stores.apiKeys.list(org.id, { limit: 10, after: null });
        await store.stores.apiKeys.countActive(org.id, new Date());
        await uncached(store, key.digest);
        expect(headerNow(watch).equals(before), `unchanged by reads (round ${i})`).to.equal(true);
      }
    });

    it("C-36: the header changes with every commit: an insert, a revocation and a rename through the store's pool, a unit of work, a second store, another process", async () => {
      const { file, url, store, org, key } = await fixture();
      const watch = watchOf(file);
      expect(watch.open()).to.equal(true);
      const other = storeOn(url);
      const added = issuedKey(org.id).key;
      const writes: Array<[string, () => Promise<unknown>]> = [
        ['insert through the pool', () => store.stores.apiKeys.insert(added)],
        ['revoke through the pool', () => storePorts(store).apiKeys.revoke(org.id, added.id, at(1))],
        ['rename through the pool', () => storePorts(store).organisations.update(org.id, { name: 'Pool Ltd', updatedAt: at(2) })],
        ['insert in a unit of work', () => store.unitOfWork.run((tx) => tx.apiKeys.insert(issuedKey(org.id).key))],
        ['rename through a second store', () => storePorts(other).organisations.update(org.id, { name: 'Other Ltd', updatedAt: at(3) })],
      ];
      for (const [what, write] of writes) {
        const before = headerNow(watch);
        await write();
        expect(headerNow(watch).equals(before), what).to.equal(false);
      }

      const before = headerNow(watch);
      const revoker = child(['revoke', file, org.id, key.id]);
      expect((await revoker.next('revoked'))['revoked']).to.equal(true);
      expect(headerNow(watch).equals(before), 'revoke in another process').to.equal(false);
      expect(await revoker.exited).to.equal(0);
    });

    it('no -shm file (a path with no database): open() is false and read() is null', () => {
      const watch = watchOf(scratchFile('absent.sqlite'));
      expect(watch.open()).to.equal(false);
      expect(watch.read()).to.equal(null);
    });

    it('a -shm file that is not a consistent WAL index (garbage, too short, torn copies, not initialised, another version) reads null; the same bytes with two equal copies read as the header', async () => {
      const { file } = await fixture();
      const live = readFileSync(`${file}-shm`).subarray(0, 96);
      const scratch = scratchFile(`scratch-${n}`);
      const watch = watchOf(scratch);

      writeFileSync(`${scratch}-shm`, Buffer.from('this is not a WAL index '.repeat(4)));
      expect(watch.open(), 'garbage').to.equal(false);
      expect(watch.read(), 'garbage').to.equal(null);

      const cases: Array<[string, Buffer]> = [
        ['too short', live.subarray(0, 95)],
        ['empty', Buffer.alloc(0)],
        ['torn: the copies differ', withByte(live, 48 + 16, live[48 + 16]! ^ 0xff)],
        ['not initialised', withByte(withByte(live, 12, 0), 48 + 12, 0)],
        ['another version', withByte(withByte(live, 0, live[0]! ^ 1), 48, live[48]! ^ 1)],
      ];
      for (const [what, bytes] of cases) {
        // Each case right after a good read, so nothing of the good header can pass for the bad one.
        writeFileSync(`${scratch}-shm`, live);
        expect(watch.read()?.equals(live.subarray(0, 48)), 'the live header, copied').to.equal(true);
        writeFileSync(`${scratch}-shm`, bytes);
        expect(watch.read(), what).to.equal(null);
      }
      watch.close();
      expect(watch.read(), 'after close()').to.equal(null);
    });
  });

  describe('C-36 through the cache', () => {
    type Fixture = Awaited<ReturnType<typeof fixture>>;
    type Write = (command: WriteCommand) => Promise<unknown>;
    /** Who writes; `open` returns the write function (a child process is started once per test). */
    const writers: Array<{ name: string; open: (f: Fixture) => Promise<Write> }> = [
      { name: 'the same store outside a unit of work', open: async (f) => (command) => applyWrite(f.store, command) },
      { name: "the same store's unit of work", open: async (f) => (command) => applyWrite(f.store, inUnitOfWork(command)) },
      {
        name: 'a second store on the file in this process',
        open: async (f) => {
          const second = storeOn(f.url);
          return (command) => applyWrite(second, command);
        },
      },
      {
        name: 'another process',
        open: async (f) => {
          const other = child(['serve', f.file, f.org.id]);
          await other.next('ready');
          return (command) => other.write(command);
        },
      },
    ];

    for (const writer of writers) {
      it(`C-36: a key revoked through ${writer.name} is found revoked by the very next findCredential, though the lookup before was served from the cache`, async () => {
        const f = await fixture();
        const { store, org, key } = f;
        const write = await writer.open(f);
        const before = await cachedCredential(store, key.digest);
        expect(await write({ op: 'revoke', organisationId: org.id, keyId: key.id, at: at(1000).getTime(), unitOfWork: false })).to.equal(true);
        const found = await store.stores.apiKeys.findCredential(key.digest);
        expect(found?.key.revokedAt?.getTime(), 'revoked on the very next lookup').to.equal(at(1000).getTime());
        expect(found).to.deep.equal({ key: { ...key, revokedAt: at(1000) }, organisation: org });
        expect(found).to.deep.equal(await uncached(store, key.digest));
        expect(before.key.revokedAt, 'the earlier answer object is not changed').to.equal(null);
        // Kept again under the new header.
        expect(await cachedCredential(store, key.digest)).to.equal(found);
      });

      it(`C-36: an organisation renamed through ${writer.name}, then made a platform organisation (an UPDATE of is_system on that store's connection), is in the very next credential`, async () => {
        const f = await fixture();
        const { store, org, key } = f;
        const write = await writer.open(f);
        await cachedCredential(store, key.digest);
        expect(await write({ op: 'rename', organisationId: org.id, name: 'Renamed Ltd', at: at(2000).getTime(), unitOfWork: false })).to.equal(true);
        const renamed = await store.stores.apiKeys.findCredential(key.digest);
        expect(renamed?.organisation, 'renamed on the very next lookup').to.deep.equal({ ...org, name: 'Renamed Ltd', updatedAt: at(2000) });

        await cachedCredential(store, key.digest);
        expect(await write({ op: 'system', organisationId: org.id, isSystem: true })).to.equal(1);
        const promoted = await store.stores.apiKeys.findCredential(key.digest);
        expect(promoted?.organisation.isSystem, 'is_system on the very next lookup').to.equal(true);
        expect(promoted).to.deep.equal(await uncached(store, key.digest));
      });
    }

    it('C-36: a key issued after its digest was looked up (null) is found by the very next lookup', async () => {
      const { store, org } = await fixture();
      const { key } = issuedKey(org.id);
      expect(await store.stores.apiKeys.findCredential(key.digest)).to.equal(null);
      expect(await store.stores.apiKeys.findCredential(key.digest)).to.equal(null);
      await store.stores.apiKeys.insert(key);
      expect((await store.stores.apiKeys.findCredential(key.digest))?.key).to.deep.equal(key);
    });

    it('C-36: a commit that lands while a result is being read (after the read, before it is kept) makes the next call read again', async () => {
      const { file, store, org, key } = await fixture();
      const reader = new SqliteReadConnection(file, 2000);
      closers.push(() => reader.close());
      reader.activate();
      expect(reader.ready).to.equal(true);
      const writer = new PlainDatabase(file);
      closers.push(() => writer.close());
      const revokedAt = () => reader.get('SELECT revoked_at FROM api_keys WHERE id = ?', [key.id])?.['revoked_at'];

      const seen = await reader.cached('k', () => {
        const value = { revokedAt: revokedAt() };
        writer.prepare('UPDATE api_keys SET revoked_at = ? WHERE organisation_id = ? AND id = ?').run(at(6000).getTime(), org.id, key.id);
        return value;
      });
      expect(seen, 'read before the commit').to.deep.equal({ revokedAt: null });
      expect(await reader.cached('k', () => ({ revokedAt: revokedAt() })), 'the very next call').to.deep.equal({ revokedAt: at(6000).getTime() });
      expect((await store.stores.apiKeys.findCredential(key.digest))?.key.revokedAt?.getTime(), 'and through the store').to.equal(at(6000).getTime());
    });

    it('C-36: one header read answers every lookup queued before it and is made after the last of them: a lookup called after a commit, while earlier ones still wait, sees the commit', async () => {
      const { file, org, key } = await fixture();
      const reader = new SqliteReadConnection(file, 2000);
      closers.push(() => reader.close());
      reader.activate();
      const writer = new PlainDatabase(file);
      closers.push(() => writer.close());
      let loads = 0;
      const load = () => {
        loads += 1;
        return { revokedAt: reader.get('SELECT revoked_at FROM api_keys WHERE id = ?', [key.id])?.['revoked_at'] ?? null };
      };
      expect(await reader.cached('k', load)).to.deep.equal({ revokedAt: null });

      const headerRead = WalIndexWatch.prototype.read;
      let headerReads = 0;
      WalIndexWatch.prototype.read = function (this: WalIndexWatch) {
        headerReads += 1;
        return headerRead.call(this);
      };
      try {
        loads = 0;
        const queuedBefore = [reader.cached('k', load), reader.cached('k', load)];
        writer.prepare('UPDATE api_keys SET revoked_at = ? WHERE organisation_id = ? AND id = ?').run(at(6000).getTime(), org.id, key.id);
        const calledAfter = reader.cached('k', load);
        expect(await calledAfter, 'called after the commit returned').to.deep.equal({ revokedAt: at(6000).getTime() });
        expect(await Promise.all(queuedBefore), 'answered by the same read').to.deep.equal([{ revokedAt: at(6000).getTime() }, { revokedAt: at(6000).getTime() }]);
        expect(headerReads, 'one header read for the three lookups').to.equal(1);
        expect(loads, 'the commit emptied the cache once; the first lookup of the queue read the row, the others were served its result').to.equal(1);

        expect(await reader.cached('k', load), 'a later lookup: its own read, nothing committed').to.deep.equal({ revokedAt: at(6000).getTime() });
        expect([headerReads, loads]).to.deep.equal([2, 1]);
      } finally {
        WalIndexWatch.prototype.read = headerRead;
      }
    });

    it('close() answers the lookups still queued, on the connection before it closes; none is left waiting', async () => {
      const { file, key } = await fixture();
      const reader = new SqliteReadConnection(file, 2000);
      reader.activate();
      const load = () => ({ id: reader.get('SELECT id FROM api_keys WHERE id = ?', [key.id])?.['id'] ?? null });
      const queued = [reader.cached('k', load), reader.cached('k', load)];
      reader.close();
      expect(reader.ready).to.equal(false);
      expect(await Promise.all(queued)).to.deep.equal([{ id: key.id }, { id: key.id }]);
    });

    it('C-40: a rolled-back unit of work commits nothing: the cached credential stays (same object) and is still right', async () => {
      const { store, org, key } = await fixture();
      const before = await cachedCredential(store, key.digest);
      const boom = new Error('rolled back on purpose');
      const caught = await store.unitOfWork
        .changeCredentials([org.id], async (tx) => {
          await tx.apiKeys.revoke(org.id, key.id, at(5000));
          await tx.organisations.update(org.id, { name: 'Never Ltd', updatedAt: at(5000) });
          throw boom;
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(caught).to.equal(boom);
      expect(await store.stores.apiKeys.findCredential(key.digest)).to.equal(before);
      expect(before).to.deep.equal(await uncached(store, key.digest));
    });
  });

  it('C-36: random revocations, issuances, renames, platform flags and checkpoints by this store, a second store and another process, interleaved with lookups: after each acknowledged write every affected lookup equals an uncached read; during it, the state before or after', async () => {
    const SEED = 0x5eed_c36;
    const STEPS = 150;
    const bytes = seededRandom(SEED).bytes;
    const int = (below: number): number => Buffer.from(bytes(4)).readUInt32LE(0) % below;
    const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
    const where = (step: number) => `seed ${SEED}, step ${step}`;

    n += 1;
    const file = scratchFile(`random-${n}.sqlite`);
    const url = `sqlite:${file}`;
    const store = storeOn(url);
    await store.migrate();
    const orgs = [organisation(), organisation(), organisation()];
    for (const org of orgs) await store.stores.organisations.create(org);
    interface Tracked {
      id: string;
      organisationId: string;
      digest: string;
      revoked: boolean;
    }
    const keys: Tracked[] = [];
    for (const org of orgs) {
      for (let i = 0; i < 3; i += 1) {
        const { key } = issuedKey(org.id);
        await store.stores.apiKeys.insert(key);
        keys.push({ id: key.id, organisationId: org.id, digest: key.digest, revoked: false });
      }
    }
    const unknown = [issuedKey(orgs[0]!.id).key.digest, issuedKey(orgs[1]!.id).key.digest];
    const second = storeOn(url);
    const other = child(['serve', file, orgs[0]!.id]);
    await other.next('ready');
    await store.stores.apiKeys.findCredential(keys[0]!.digest); // opens the read connection
    const writers: Array<[string, (command: WriteCommand) => Promise<unknown>]> = [
      ['this store', (command) => applyWrite(store, command)],
      ['a second store', (command) => applyWrite(second, command)],
      ['another process', (command) => other.write(command)],
    ];
    const show = (c: Credential | null): string => JSON.stringify(c);
    const lastAnswer = new Map<string, Credential | null>();
    let hits = 0;
    let writes = 0;
    const tally: Record<string, number> = {};

    /** A lookup through the cache, checked against an uncached read; counts the answers served from the cache. */
    const lookup = async (digest: string, step: number, what: string): Promise<Credential | null> => {
      const found = await store.stores.apiKeys.findCredential(digest);
      expect(found, `${where(step)}: ${what}`).to.deep.equal(await uncached(store, digest));
      if (found !== null && found === lastAnswer.get(digest)) hits += 1;
      lastAnswer.set(digest, found);
      return found;
    };

    for (let step = 0; step < STEPS; step += 1) {
      if (int(10) < 4) {
        // Lookups only: nothing commits meanwhile, so a second lookup of a known key is a cache hit.
        for (let i = 1 + int(3); i > 0; i -= 1) {
          const digest = int(5) === 0 ? pick(unknown) : pick(keys).digest;
          const found = await lookup(digest, step, 'a lookup');
          const again = await store.stores.apiKeys.findCredential(digest);
          if (found === null) expect(again, where(step)).to.equal(null);
          else expect(again, `${where(step)}: nothing committed, served from the cache`).to.equal(found);
        }
        continue;
      }

      const [writerName, write] = pick(writers);
      const active = keys.filter((k) => !k.revoked);
      const kind = pick(['revoke', 'insert', 'rename', 'system', 'checkpoint'] as const);
      const unitOfWork = int(2) === 0;
      const org = pick(orgs);
      let command: WriteCommand;
      let affected: string[];
      let expectedAnswer: unknown = true;
      let apply = (): void => {};
      if (kind === 'revoke' && active.length > 0) {
        const target = pick(active);
        command = { op: 'revoke', organisationId: target.organisationId, keyId: target.id, at: at(step).getTime(), unitOfWork };
        affected = [target.digest];
        apply = () => (target.revoked = true);
      } else if (kind === 'insert' || kind === 'revoke') {
        const { key } = issuedKey(org.id, { createdAt: at(step) });
        command = { op: 'insert', key: keyToJson(key), unitOfWork };
        affected = [key.digest];
        apply = () => keys.push({ id: key.id, organisationId: org.id, digest: key.digest, revoked: false });
      } else if (kind === 'rename') {
        command = { op: 'rename', organisationId: org.id, name: `Renamed ${step}`, at: at(step).getTime(), unitOfWork };
        affected = keys.filter((k) => k.organisationId === org.id).map((k) => k.digest);
      } else if (kind === 'system') {
        const current = await uncached(store, keys.find((k) => k.organisationId === org.id)!.digest);
        command = { op: 'system', organisationId: org.id, isSystem: !current!.organisation.isSystem };
        affected = keys.filter((k) => k.organisationId === org.id).map((k) => k.digest);
        expectedAnswer = 1;
      } else {
        command = { op: 'checkpoint' };
        affected = [pick(keys).digest, pick(keys).digest, pick(unknown)];
        expectedAnswer = undefined;
      }
      const what = `${command.op}${unitOfWork && 'unitOfWork' in command ? ' in a unit of work' : ''} by ${writerName}`;
      tally[what] = (tally[what] ?? 0) + 1;

      // The state before, read (and kept) through the cache.
      const before = new Map<string, string>();
      for (const digest of affected) before.set(digest, show(await lookup(digest, step, `before ${what}`)));

      // Lookups while the write is under way: each answer is a committed state, the one before or the one after.
      let settled = false;
      const writing = write(command).finally(() => (settled = true));
      const during: Array<[string, string]> = [];
      while (!settled) {
        for (const digest of affected) during.push([digest, show(await store.stores.apiKeys.findCredential(digest))]);
        await new Promise((resolve) => setImmediate(resolve));
      }
      const answer = await writing;
      if (expectedAnswer !== undefined) expect(answer, `${where(step)}: ${what} acknowledged`).to.equal(expectedAnswer);
      apply();
      writes += 1;

      // The very next lookup of every affected digest: what an uncached read answers, and changed by the write.
      const after = new Map<string, string>();
      for (const digest of affected) {
        const found = show(await lookup(digest, step, `the very next lookup after ${what}`));
        after.set(digest, found);
        if (command.op === 'checkpoint') expect(found, `${where(step)}: a checkpoint changes no answer`).to.equal(before.get(digest));
        else expect(found, `${where(step)}: ${what} shows`).to.not.equal(before.get(digest));
      }
      for (const [digest, seen] of during) {
        expect([before.get(digest), after.get(digest)], `${where(step)}: a lookup during ${what}`).to.include(seen);
      }
    }

    other.end();
    expect(await other.exited).to.equal(0);
    // Sanity: the run did what it claims (writes of every kind by every writer, and cache hits between them).
    expect(writes, 'writes').to.be.greaterThan(STEPS / 3);
    for (const writerName of ['this store', 'a second store', 'another process']) {
      for (const op of ['revoke', 'insert', 'rename', 'system', 'checkpoint']) {
        expect(
          Object.keys(tally).some((w) => w.startsWith(`${op}`) && w.endsWith(`by ${writerName}`)),
          `${op} by ${writerName} in ${JSON.stringify(tally)}`,
        ).to.equal(true);
      }
    }
    expect(hits, 'lookups served from the cache').to.be.greaterThan(0);
  });

  describe('what the cache keeps', () => {
    it(`the reader keeps no null answers and at most READ_CACHE_MAX_ENTRIES (${READ_CACHE_MAX_ENTRIES}) results, dropping the oldest first`, async () => {
      const { file } = await fixture();
      const reader = new SqliteReadConnection(file, 2000);
      closers.push(() => reader.close());
      reader.activate();
      expect(reader.ready).to.equal(true);
      let loads = 0;
      const load = (value: object | null) => () => {
        loads += 1;
        return value;
      };

      expect(await reader.cached('unknown', load(null))).to.equal(null);
      expect(await reader.cached('unknown', load(null))).to.equal(null);
      expect(loads, 'a null answer is read again').to.equal(2);
      expect(reader.cachedEntries, 'null answers are not kept').to.equal(0);

      const values: object[] = [];
      for (let i = 0; i <= READ_CACHE_MAX_ENTRIES; i += 1) {
        values.push({ i });
        expect(await reader.cached(`k${i}`, load(values[i]!))).to.equal(values[i]);
      }
      expect(reader.cachedEntries, 'bounded').to.equal(READ_CACHE_MAX_ENTRIES);
      loads = 0;
      expect(await reader.cached(`k${READ_CACHE_MAX_ENTRIES}`, load({ stale: true })), 'the newest is kept').to.equal(values[READ_CACHE_MAX_ENTRIES]);
      expect(await reader.cached('k1', load({ stale: true })), 'the second oldest is kept').to.equal(values[1]);
      expect(loads).to.equal(0);
      const reloaded = { i: 0, again: true };
      expect(await reader.cached('k0', load(reloaded)), 'the oldest was dropped and is read again').to.equal(reloaded);
      expect(loads).to.equal(1);
      expect(reader.cachedEntries, 'still bounded').to.equal(READ_CACHE_MAX_ENTRIES);
    });

    it(`through the store: ${READ_CACHE_MAX_ENTRIES + 1} keys looked up drop the first one from the cache; unknown digests displace nothing`, async () => {
      const { store, org } = await fixture();
      const many = Array.from({ length: READ_CACHE_MAX_ENTRIES + 1 }, () => issuedKey(org.id).key);
      await store.unitOfWork.run(async (tx) => {
        for (const key of many) await tx.apiKeys.insert(key);
      });
      const answers: Array<Credential | null> = [];
      for (const key of many) answers.push(await store.stores.apiKeys.findCredential(key.digest));
      expect(answers.every((a, i) => a?.key.id === many[i]!.id)).to.equal(true);

      const last = many.length - 1;
      expect(await store.stores.apiKeys.findCredential(many[last]!.digest), 'the newest is served from the cache').to.equal(answers[last]);
      expect(await store.stores.apiKeys.findCredential(many[1]!.digest), 'so is the second').to.equal(answers[1]);
      const first = await store.stores.apiKeys.findCredential(many[0]!.digest);
      expect(first, 'the first was dropped and read again').to.not.equal(answers[0]);
      expect(first).to.deep.equal(answers[0]);

      // Re-reading the first dropped the second; everything from the third on is still kept.
      for (let i = 0; i <= READ_CACHE_MAX_ENTRIES; i += 1) {
        expect(await store.stores.apiKeys.findCredential(issuedKey(org.id).key.digest)).to.equal(null);
      }
      expect(await store.stores.apiKeys.findCredential(many[2]!.digest), 'not displaced by null answers').to.equal(answers[2]);
      expect(await store.stores.apiKeys.findCredential(many[0]!.digest), 'nor the re-read first').to.equal(first);
    });
  });
});

/** The same write inside a unit of work (where the store has a method for it). */
function inUnitOfWork(command: WriteCommand): WriteCommand {
  return 'unitOfWork' in command ? { ...command, unitOfWork: true } : command;
}

function withByte(bytes: Buffer, offset: number, value: number): Buffer {
  const copy = Buffer.from(bytes);
  copy[offset] = value;
  return copy;
}
