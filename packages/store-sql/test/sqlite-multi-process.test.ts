/**
 * Several processes on one SQLite file: `cos-admin key issue …` / `org create …` run next to
 * `cos-admin serve` on the embedded default, each with its own one-connection pool. A unit of work
 * reads first (organisation lookup, countActive, findById) and writes afterwards; it must wait for
 * another connection's write transaction and then succeed, never fail with SQLITE_BUSY(_SNAPSHOT) ->
 * UnavailableError (C-17: 503 only when the store really does not answer in time), and each write
 * commits exactly once together with its audit entry (C-40, C-41).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { auditRecord, ChainVerifier, ConflictError, createCore, InProcessRateCounter, OPERATOR, UnavailableError, type ChainedAuditEntry } from '@cos/core';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import { issuedKey } from './support/fixtures.js';
import { churn, type ChurnResult } from './support/key-churn.js';
import { applyWrite, type WriteCommand } from './support/store-writes.js';
import { SqliteChild } from './support/sqlite-child.js';

const UNITS = 200;

interface KeyRow {
  id: string;
  revoked_at: number | null;
}
interface AuditRow {
  kind: string;
  key_id: string | null;
}

/** Every issued key is stored once and revoked, with exactly one api_key_issued and one api_key_revoked entry. */
async function expectEachWriteOnceWithItsAudit(store: SqlStore, organisationId: string, issued: readonly string[]): Promise<void> {
  const keys = (await store.knex.raw('SELECT id, revoked_at FROM api_keys WHERE organisation_id = ?', [organisationId])) as KeyRow[];
  expect(keys.map((k) => k.id).sort(), 'every key stored exactly once, nothing else').to.deep.equal([...issued].sort());
  expect(keys.filter((k) => k.revoked_at === null), 'every key revoked').to.deep.equal([]);
  const audit = (await store.knex.raw("SELECT kind, key_id FROM audit_entries WHERE organisation_id = ? AND kind LIKE 'api_key_%'", [
    organisationId,
  ])) as AuditRow[];
  for (const kind of ['api_key_issued', 'api_key_revoked']) {
    const ids = audit.filter((a) => a.kind === kind).map((a) => a.key_id);
    expect(ids.length, `${kind} entries`).to.equal(issued.length);
    expect(new Set(ids).size, `one ${kind} entry per key`).to.equal(issued.length);
    expect([...ids].sort(), `${kind} entries name the issued keys`).to.deep.equal([...issued].sort());
  }
}

function expectNoFailures(label: string, result: ChurnResult): void {
  const tally: Record<string, number> = {};
  for (const f of result.failures) {
    const kind = `${f.name}${f.causeCode === null ? '' : ` (${f.causeCode})`}`;
    tally[kind] = (tally[kind] ?? 0) + 1;
  }
  expect(tally, `${label}: failed units of work (an UnavailableError is a 503 / a failed CLI command)`).to.deep.equal({});
  expect(result.issued, label).to.have.length(UNITS);
}

describe('SQLite: several processes on one file', function () {
  this.timeout(60_000);
  let dir: string;
  let n = 0;
  const children: SqliteChild[] = [];
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'cos-store-sql-multi-'));
  });
  afterEach(() => {
    for (const child of children.splice(0)) child.kill();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** A migrated file with one organisation, written and closed by a store of its own. */
  async function freshFile(): Promise<{ file: string; url: string; organisationId: string }> {
    n += 1;
    const file = join(dir, `cos-${n}.sqlite`);
    const url = `sqlite:${file}`;
    const setup = createSqlStore({ databaseUrl: url });
    try {
      await setup.migrate();
      const core = createCore({ ...setup, counter: new InProcessRateCounter() });
      const org = await core.organisations.create(OPERATOR, { name: `Multi ${n}`, slug: `multi-${n}` });
      return { file, url, organisationId: org.id };
    } finally {
      await setup.close();
    }
  }

  function child(args: readonly string[]): SqliteChild {
    const c = new SqliteChild(args);
    children.push(c);
    return c;
  }

  it(`C-17, C-40: two stores on one file, ${UNITS} concurrent units of work each (issue: count + insert + audit; revoke + audit): no UnavailableError, every write once with one audit entry`, async () => {
    const { url, organisationId } = await freshFile();
    const a = createSqlStore({ databaseUrl: url });
    const b = createSqlStore({ databaseUrl: url });
    try {
      const [ra, rb] = await Promise.all([churn(a, organisationId, UNITS, 'a'), churn(b, organisationId, UNITS, 'b')]);
      expect(ra.startedAt < rb.finishedAt && rb.startedAt < ra.finishedAt, 'the two stores wrote at the same time').to.equal(true);
      expectNoFailures('store a', ra);
      expectNoFailures('store b', rb);
      await expectEachWriteOnceWithItsAudit(a, organisationId, [...ra.issued, ...rb.issued]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('C-63: two stores on one file and another process appending to one chain in turn: each append links after whichever wrote last, the chain verifies', async () => {
    const { file, url, organisationId } = await freshFile();
    const a = createSqlStore({ databaseUrl: url });
    const b = createSqlStore({ databaseUrl: url });
    const other = child(['serve', file, organisationId]);
    try {
      await other.next('ready');
      const append = (where: SqlStore | SqliteChild, unitOfWork: boolean): Promise<number> => {
        const command: WriteCommand = { op: 'append', organisationId, unitOfWork };
        return where instanceof SqliteChild
          ? (where.write(command) as Promise<number>)
          : applyWrite(where, command).then((seq) => seq as number);
      };
      // Runs of one writer broken by another, in units of work and alone: a head a store kept from
      // its own last append would be stale after each change of writer.
      const turns: Array<SqlStore | SqliteChild> = [a, a, b, a, other, a, a, b, b, other, other, b, a, other, a, b];
      const seqs: number[] = [];
      for (const [i, where] of turns.entries()) seqs.push(await append(where, i % 3 === 0));
      const total = turns.length + 1; // and organisation_created
      expect(seqs, 'every append linked after the one before it').to.deep.equal(Array.from({ length: turns.length }, (_, i) => i + 2));
      other.end();
      expect(await other.exited).to.equal(0);
      const chain: ChainedAuditEntry[] = await a.stores.audit.chain(organisationId, { afterSeq: 0, limit: 100 });
      const v = new ChainVerifier(organisationId);
      for (const e of chain) v.push(auditRecord(e));
      expect(v.finish()).to.include({ status: 'ok', entries: total });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("C-36: a key revoked by another process is found revoked by this process's very next findCredential (the read-only connection sees the commit at once)", async () => {
    const { file, url, organisationId } = await freshFile();
    const { key } = issuedKey(organisationId);
    const store = createSqlStore({ databaseUrl: url });
    try {
      await store.stores.apiKeys.insert(key);
      // Twice: the first read goes through the pool and opens the read connection, the second is served by it.
      for (let i = 0; i < 2; i += 1) expect((await store.stores.apiKeys.findCredential(key.digest))?.key.revokedAt).to.equal(null);
      const other = child(['revoke', file, organisationId, key.id]);
      expect((await other.next('revoked'))['revoked']).to.equal(true);
      const found = await store.stores.apiKeys.findCredential(key.digest);
      expect(found?.key.id).to.equal(key.id);
      expect(found?.key.revokedAt, 'revoked on the very next lookup').to.be.an.instanceOf(Date);
      expect(await other.exited).to.equal(0);
    } finally {
      await store.close();
    }
  });

  it(`C-17, C-40: another process (createSqlStore in a child) and this one, ${UNITS} concurrent key issuances + revocations each: no UnavailableError, every write once with one audit entry`, async () => {
    const { file, url, organisationId } = await freshFile();
    const other = child(['churn', file, organisationId, String(UNITS)]);
    const store = createSqlStore({ databaseUrl: url });
    try {
      await store.stores.organisations.findById(organisationId); // open the connection first, like the child
      await other.next('ready');
      other.send('go');
      const [mine, theirs] = await Promise.all([
        churn(store, organisationId, UNITS, 'parent'),
        other.next('result').then((m) => m['result'] as ChurnResult),
      ]);
      expect(mine.startedAt < theirs.finishedAt && theirs.startedAt < mine.finishedAt, 'the two processes wrote at the same time').to.equal(true);
      expectNoFailures('this process', mine);
      expectNoFailures('the other process', theirs);
      expect(await other.exited).to.equal(0);
      await expectEachWriteOnceWithItsAudit(store, organisationId, [...mine.issued, ...theirs.issued]);
    } finally {
      await store.close();
    }
  });

  it("C-17: a unit of work that reads first waits for another process's open write transaction (held ~300 ms), then succeeds; the event loop keeps running meanwhile", async () => {
    const { file, url, organisationId } = await freshFile();
    const store = createSqlStore({ databaseUrl: url });
    const core = createCore({ ...store, counter: new InProcessRateCounter() });
    const holder = child(['hold', file, organisationId, '300']);
    try {
      await store.stores.organisations.findById(organisationId);
      const held = await holder.next('locked');
      let ticks = 0;
      const ticker = setInterval(() => (ticks += 1), 10);
      const started = performance.now();
      try {
        // findById + countActive (reads), then insert + audit (writes).
        const { key } = await core.apiKeys.issue(OPERATOR, organisationId, { label: 'after the wait' });
        const waited = performance.now() - started;
        expect(waited, 'waited for the other transaction').to.be.greaterThan(150);
        expect(waited, 'within the 2 s budget').to.be.lessThan(2000);
        expect(ticks, 'timers ran while the unit of work waited for the lock').to.be.greaterThan(3);
        expect(await store.stores.apiKeys.findById(organisationId, key.id)).to.not.equal(null);
      } finally {
        clearInterval(ticker);
      }
      expect((await holder.next('committed'))['keyId']).to.equal(held['keyId']);
      expect(await holder.exited).to.equal(0);
      expect(await store.stores.apiKeys.findById(organisationId, String(held['keyId'])), "the other process's write").to.not.equal(null);
      expect(await store.stores.apiKeys.countActive(organisationId, new Date())).to.equal(2);
      const busy = (await store.knex.raw('PRAGMA busy_timeout')) as Array<{ timeout: number }>;
      expect(busy[0]!.timeout, 'single statements keep the 2 s busy timeout after the wait').to.equal(2000);
    } finally {
      await store.close();
    }
  });

  it("C-17: a unit of work whose budget runs out while another process holds the write lock answers UnavailableError in time, writes nothing, and the store resumes", async () => {
    const { file, url, organisationId } = await freshFile();
    const store = createSqlStore({ databaseUrl: url, statementTimeoutMs: 300 });
    const core = createCore({ ...store, counter: new InProcessRateCounter() });
    const holder = child(['hold', file, organisationId, '1500']);
    try {
      await store.stores.organisations.findById(organisationId);
      const held = await holder.next('locked');
      let ticks = 0;
      const ticker = setInterval(() => (ticks += 1), 10);
      const started = performance.now();
      const failed = await core.apiKeys.issue(OPERATOR, organisationId, { label: 'too late' }).then(
        () => null,
        (e: unknown) => e,
      );
      const took = performance.now() - started;
      clearInterval(ticker);
      expect(failed, String(failed)).to.be.instanceOf(UnavailableError);
      expect(took, 'gave up after the 300 ms budget, well within C-17\'s 2 s').to.be.within(250, 1500);
      expect(ticks, 'timers ran while the unit of work waited for the lock').to.be.greaterThan(3);
      await holder.next('committed');
      expect(await holder.exited).to.equal(0);
      const keys = await store.stores.apiKeys.list(organisationId, { limit: 10, after: null });
      expect(keys.map((k) => k.id), "only the other process's key; nothing half-written").to.deep.equal([held['keyId']]);
      const audit = (await store.knex.raw('SELECT count(*) AS n FROM audit_entries WHERE organisation_id = ? AND kind = ?', [
        organisationId,
        'api_key_issued',
      ])) as Array<{ n: number }>;
      expect(audit[0]!.n, 'no audit entry for the refused issuance').to.equal(0);
      const { key } = await core.apiKeys.issue(OPERATOR, organisationId, { label: 'resumed' });
      expect((await store.stores.apiKeys.findById(organisationId, key.id))?.label).to.equal('resumed');
    } finally {
      await store.close();
    }
  });

  it("C-25: the active-key cap holds across processes: a unit of work that waited counts the other process's key committed meanwhile", async () => {
    const { file, url, organisationId } = await freshFile();
    const store = createSqlStore({ databaseUrl: url });
    const core = createCore({ ...store, counter: new InProcessRateCounter(), config: { maxActiveKeysPerOrg: 1 } });
    const holder = child(['hold', file, organisationId, '300']);
    try {
      await store.stores.organisations.findById(organisationId);
      await holder.next('locked');
      const refused = await core.apiKeys.issue(OPERATOR, organisationId, { label: 'one too many' }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(refused, String(refused)).to.be.instanceOf(ConflictError);
      expect(await holder.exited).to.equal(0);
      expect(await store.stores.apiKeys.countActive(organisationId, new Date())).to.equal(1);
    } finally {
      await store.close();
    }
  });
});
