/**
 * `cos-admin audit verify | checkpoint | export` over real databases, in process (C-63): the log is
 * tampered with directly in SQL, as someone with write access to the database would, and each
 * tampering is found at the right seq with the right reason; checkpoints catch truncation and full
 * rewrites with recomputed hashes; the export verifies alone.
 */
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { expect } from 'chai';
import { auditRecord, GENESIS_HASH, linkAuditEntry, recordHash, type AuditEntry, type ChainReport } from '@cos/core';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import { exportLog, openCheckpoint, signCheckpoint, verifyFile, verifyStore } from '../src/audit-integrity.js';

const ORG_A = 'a1000000-0000-4000-8000-000000000000';
const ORG_B = 'b1000000-0000-4000-8000-000000000000';
const KEY = 'c1000000-0000-4000-8000-000000000000';

/** Eight entries of A (several kinds and details), three of B. */
function entries(org: string, n: number): AuditEntry[] {
  const kinds: AuditEntry[] = [
    { id: '', kind: 'organisation_created', occurredAt: new Date(0), organisationId: org, keyId: null, keyPrefix: null, actor: { type: 'operator', name: 'alice' } },
    { id: '', kind: 'api_key_issued', occurredAt: new Date(0), organisationId: org, keyId: KEY, keyPrefix: 'svc_live_Abc', actor: { type: 'operator' } },
    {
      id: '',
      kind: 'api_key_exposed',
      occurredAt: new Date(0),
      organisationId: org,
      keyId: KEY,
      keyPrefix: 'svc_live_Abc',
      actor: { type: 'secret_scanning' },
      exposure: { type: 'cos_api_key', url: 'https://github.com/acme/app/blob/1/.env', source: 'content' },
    },
    { id: '', kind: 'member_added', occurredAt: new Date(0), organisationId: org, keyId: null, keyPrefix: null, actor: { type: 'operator', name: 'bob' }, member: { id: randomUUID() } },
    {
      id: '',
      kind: 'api_key_rolled',
      occurredAt: new Date(0),
      organisationId: org,
      keyId: KEY,
      keyPrefix: 'svc_live_Abc',
      actor: { type: 'api_key', keyId: KEY },
      roll: { toKeyId: randomUUID(), gracePeriodSeconds: 60 },
    },
  ];
  return Array.from({ length: n }, (_, i) => ({ ...kinds[i % kinds.length]!, id: randomUUID(), occurredAt: new Date(Date.UTC(2026, 5, 10, 12, 0, i)) }));
}

interface Db {
  readonly name: string;
  open(): Promise<{ store: SqlStore; raw: SqlStore['knex']; close(): Promise<void> }>;
}

function sqliteDb(): Db {
  return {
    name: 'SQLite',
    async open() {
      const dir = mkdtempSync(join(tmpdir(), 'cos-audit-tamper-'));
      const store = createSqlStore({ databaseUrl: `sqlite:${join(dir, 'cos.sqlite')}` });
      await store.migrate();
      return {
        store,
        raw: store.knex,
        async close() {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  };
}

function postgresDb(url: string): Db {
  return {
    name: 'Postgres',
    async open() {
      const schema = `cos_test_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
      const admin = createSqlStore({ databaseUrl: url, poolMax: 1, statementTimeoutMs: 60_000 });
      await admin.knex.raw('CREATE SCHEMA ??', [schema]);
      const store = createSqlStore({ databaseUrl: url, schema });
      await store.migrate();
      return {
        store,
        raw: store.knex,
        async close() {
          await store.close();
          await admin.knex.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
          await admin.close();
        },
      };
    },
  };
}

const url = process.env['TEST_DATABASE_URL'];
const DBS: Db[] = [sqliteDb(), ...(url ? [postgresDb(url)] : [])];

const brokenOf = (reports: readonly ChainReport[], org: string) => reports.find((r) => r.organisation_id === org)?.broken;
const statusOf = (reports: readonly ChainReport[]) => Object.fromEntries(reports.map((r) => [r.organisation_id, r.status]));

for (const db of DBS) {
  describe(`audit integrity on ${db.name} (C-63)`, function () {
    this.timeout(30_000);
    let ctx: Awaited<ReturnType<Db['open']>>;
    let dir: string;

    beforeEach(async () => {
      ctx = await db.open();
      for (const e of entries(ORG_A, 8)) await ctx.store.stores.audit.append(e);
      for (const e of entries(ORG_B, 3)) await ctx.store.stores.audit.append(e);
      dir = mkdtempSync(join(tmpdir(), 'cos-audit-files-'));
    });
    afterEach(async () => {
      await ctx.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const verify = (options: Parameters<typeof verifyStore>[1] = {}) => verifyStore(ctx.store.stores.audit, { pageSize: 3, ...options });
    const rows = () => ctx.raw('audit_entries').where({ organisation_id: ORG_A });
    /** Moves seq `from` to `to` (through a free seq, as UNIQUE (organisation_id, seq) requires). */
    const setSeq = (from: number, to: number) => rows().where({ seq: from }).update({ seq: to });

    it('C-63: an untouched log verifies ok for every organisation, with its head', async () => {
      const reports = await verify();
      expect(statusOf(reports)).to.deep.equal({ [ORG_A]: 'ok', [ORG_B]: 'ok' });
      expect(reports.find((r) => r.organisation_id === ORG_A)).to.deep.include({ entries: 8, first_seq: 1 });
      expect((await verify({ org: ORG_B })).map((r) => [r.organisation_id, r.entries])).to.deep.equal([[ORG_B, 3]]);
    });

    it('C-63: UPDATE of a detail (an exposure url) is "entry_changed" at its seq; the other organisation still holds', async () => {
      await rows().where({ seq: 3 }).update({ exposure_url: 'https://example.com/elsewhere' });
      const reports = await verify();
      expect(brokenOf(reports, ORG_A)).to.include({ seq: 3, reason: 'entry_changed' });
      expect(statusOf(reports)[ORG_B]).to.equal('ok');
    });

    it('C-63: UPDATE of the actor name or the time is "entry_changed" at its seq', async () => {
      await rows().where({ seq: 6 }).update({ actor_name: 'mallory' });
      expect(brokenOf(await verify(), ORG_A)).to.include({ seq: 6, reason: 'entry_changed' });
    });

    it('C-63: DELETE of an entry is "entry_missing" at its seq (also when later seqs are renumbered to close the gap)', async () => {
      await rows().where({ seq: 4 }).delete();
      expect(brokenOf(await verify(), ORG_A)).to.include({ seq: 4, reason: 'entry_missing' });
      for (let s = 5; s <= 8; s++) await setSeq(s, s - 1);
      expect(brokenOf(await verify(), ORG_A)).to.include({ seq: 4, reason: 'entry_missing' });
    });

    it('C-63: two entries swapped is "entries_reordered" at the first of them', async () => {
      await setSeq(5, 100);
      await setSeq(6, 5);
      await setSeq(100, 6);
      expect(brokenOf(await verify(), ORG_A)).to.include({ seq: 5, reason: 'entries_reordered' });
    });

    it('C-63: an entry inserted in the middle (its hash computed, later seqs shifted) is "entry_inserted" at its seq', async () => {
      const [third] = await ctx.store.stores.audit.chain(ORG_A, { afterSeq: 2, limit: 1 });
      for (let s = 8; s >= 4; s--) await setSeq(s, s + 1);
      const forged = linkAuditEntry(entries(ORG_A, 1)[0]!, third!);
      expect(forged.seq).to.equal(4);
      await ctx.raw('audit_entries').insert({
        id: forged.id,
        kind: forged.kind,
        occurred_at: forged.occurredAt.getTime(),
        organisation_id: ORG_A,
        actor_type: 'operator',
        actor_name: 'alice',
        seq: forged.seq,
        prev_hash: forged.prevHash,
        hash: forged.hash,
      });
      expect(brokenOf(await verify(), ORG_A)).to.include({ seq: 4, reason: 'entry_inserted' });
    });

    it('C-63: a checkpoint proves the log extends it; truncation after it, or a full rewrite with recomputed hashes, fails; a forged checkpoint is refused', async () => {
      const { privateKey, publicKey } = generateKeyPairSync('ed25519');
      const priv = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
      const pub = publicKey.export({ type: 'spki', format: 'pem' }).toString();
      const signed = signCheckpoint(await ctx.store.stores.audit.heads(), new Date('2026-06-11T00:00:00.000Z'), priv);
      expect(signed.heads.map((h) => [h.organisation_id, h.seq])).to.deep.equal([
        [ORG_A, 8],
        [ORG_B, 3],
      ]);
      const checkpoint = openCheckpoint(JSON.stringify(signed), pub);

      // The log grows after the checkpoint: it still extends it.
      await ctx.store.stores.audit.append(entries(ORG_A, 1)[0]!);
      expect((await verify({ checkpoint })).map((r) => r.checkpoint)).to.deep.equal(['extends', 'extends']);

      // A forged or altered checkpoint does not open.
      const altered = { ...signed, heads: [{ ...signed.heads[0]!, seq: 2 }, signed.heads[1]!] };
      expect(() => openCheckpoint(JSON.stringify(altered), pub)).to.throw(/signature does not verify/);
      const other = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();
      expect(() => openCheckpoint(JSON.stringify(signed), other)).to.throw(/signature does not verify/);

      // Rewrite: change entry 2 of A and recompute every hash after it, in the database.
      await rows().where({ seq: 2 }).update({ key_prefix: 'svc_live_Xyz' });
      let prev = GENESIS_HASH;
      for (const e of await ctx.store.stores.audit.chain(ORG_A, { afterSeq: 0, limit: 100 })) {
        const rec = { ...auditRecord(e), prev_hash: prev };
        const hash = recordHash(rec);
        await rows().where({ seq: e.seq }).update({ prev_hash: prev, hash });
        prev = hash;
      }
      expect(statusOf(await verify()), 'the rewritten chain holds by itself').to.deep.equal({ [ORG_A]: 'ok', [ORG_B]: 'ok' });
      expect(brokenOf(await verify({ checkpoint }), ORG_A)).to.include({ seq: 8, reason: 'checkpoint_rewritten' });

      // Truncate B after the checkpoint (the rest of its chain is sound).
      await ctx.raw('audit_entries').where({ organisation_id: ORG_B, seq: 3 }).delete();
      expect(statusOf(await verify())[ORG_B]).to.equal('ok');
      expect(brokenOf(await verify({ checkpoint }), ORG_B)).to.include({ seq: 3, reason: 'checkpoint_truncated' });
      // Every entry of B gone: still found.
      await ctx.raw('audit_entries').where({ organisation_id: ORG_B }).delete();
      expect(brokenOf(await verify({ checkpoint }), ORG_B)).to.include({ seq: 1, reason: 'checkpoint_truncated' });
    });

    it('C-63: the JSON Lines export holds seq, prev_hash and hash and verifies alone; --org/--since/--until give unbroken pieces; a changed line is found', async () => {
      const path = join(dir, 'export.jsonl');
      const out = createWriteStream(path);
      expect(await exportLog(ctx.store.stores.audit, out, { pageSize: 2 })).to.equal(11);
      out.end();
      await finished(out);
      const lines = readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.map((l) => [l.organisation_id, l.seq])).to.deep.equal([
        ...Array.from({ length: 8 }, (_, i) => [ORG_A, i + 1]),
        ...Array.from({ length: 3 }, (_, i) => [ORG_B, i + 1]),
      ]);
      expect(Object.keys(lines[0]!)).to.deep.equal(['id', 'organisation_id', 'seq', 'kind', 'occurred_at', 'actor', 'key_id', 'key_prefix', 'detail', 'prev_hash', 'hash']);
      expect(statusOf(await verifyFile(path))).to.deep.equal({ [ORG_A]: 'ok', [ORG_B]: 'ok' });

      // A window of A: from the first entry at or after 12:00:02 to before the first at or after 12:00:05.
      const piece = join(dir, 'piece.jsonl');
      const pieceOut = createWriteStream(piece);
      await exportLog(ctx.store.stores.audit, pieceOut, { org: ORG_A, since: new Date('2026-06-10T12:00:02Z'), until: new Date('2026-06-10T12:00:05Z') });
      pieceOut.end();
      await finished(pieceOut);
      const pieceLines = readFileSync(piece, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { seq: number });
      expect(pieceLines.map((l) => l.seq)).to.deep.equal([3, 4, 5]);
      expect(await verifyFile(piece)).to.deep.equal([
        { organisation_id: ORG_A, status: 'ok', entries: 3, head: { seq: 5, hash: (pieceLines[2] as unknown as { hash: string }).hash }, first_seq: 3, checkpoint: null },
      ]);

      // One character changed in a line of the full export.
      const tampered = join(dir, 'tampered.jsonl');
      const text = readFileSync(path, 'utf8').split('\n');
      text[5] = text[5]!.replace('"kind":"', '"kind":"x');
      const w = createWriteStream(tampered);
      w.end(text.join('\n'));
      await finished(w);
      expect(brokenOf(await verifyFile(tampered), ORG_A)).to.include({ seq: 6, reason: 'entry_changed' });
    });
  });
}
