#!/usr/bin/env node
// What one audit append costs SQLite itself, by variant of the audit_entries table, without the
// service around it: better-sqlite3 directly on files migrated by a checkout's own store, each
// transaction BEGIN IMMEDIATE, [head read], one INSERT of a revocation entry, COMMIT (the
// store's units of work, on a file in WAL mode with the store's default pragmas). The variants
// take turns in blocks (order reversed every other round); prints each one's median CPU µs per
// transaction (and the system part), the median of the per-block ratios to the first, and the
// WAL frames each commit writes (the WAL's growth over 100 commits, checkpoints off).
//
//   node bench/audit-append-storage.mjs [--root <checkout>] [--blocks 30] [--size 500]
//
// Variants: before    the entry without chain columns and without UNIQUE (organisation_id, seq),
//                     with the full (kind, occurred_at, id) index (the row and indexes `ae8deb1` wrote)
//           chain     head read, seq / prev_hash / hash as hex text, the UNIQUE index (the store's
//                     append, on the indexes the checkout's migrations create)
//           full-kind chain with the full (kind, occurred_at, id) index instead of the checkout's kind
//                     index (before migration 0012 made it partial)
//           no-read   chain without the head read (what a head cache would leave)
//           no-unique chain columns written, no head read, no UNIQUE (organisation_id, seq) index
//           blob      chain with both hashes as 32-byte BLOBs
//           org-seq   chain on a WITHOUT ROWID table keyed by (organisation_id, seq), id UNIQUE
//           no-kind   chain without any kind index
//           no-org    chain without the (organisation_id, occurred_at, id) index
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { pairedFigures, runPairedBlocks } from './lib/paired.mjs';

const { values: opt } = parseArgs({
  options: {
    root: { type: 'string', default: '.' },
    blocks: { type: 'string', default: '30' },
    size: { type: 'string', default: '500' },
  },
});
const root = path.resolve(opt.root);
const blocks = Number(opt.blocks);
const size = Number(opt.size);
const PREFILL = 3000;
const storeSql = path.join(root, 'packages', 'store-sql');
const Database = createRequire(path.join(storeSql, 'package.json'))('better-sqlite3');
const { createSqlStore } = await import(pathToFileURL(path.join(storeSql, 'dist', 'index.js')).href);

const dropUnique = (db) => db.exec('DROP INDEX audit_entries_organisation_seq_unique');
// The full kind index (migrations 0001-0011) or the partial one that replaced it (0012).
const noKindIndex = (db) => {
  for (const index of ['audit_entries_kind_occurred_at_id', 'audit_entries_rare_kind_occurred_at_id']) db.exec(`DROP INDEX IF EXISTS ${index}`);
};
const fullKindIndex = (db) => {
  noKindIndex(db);
  db.exec('CREATE INDEX audit_entries_kind_occurred_at_id ON audit_entries (kind, occurred_at, id)');
};
const variants = [
  { name: 'before', prepare: (db) => (dropUnique(db), fullKindIndex(db)), read: false, chain: false },
  { name: 'chain', prepare: () => {}, read: true, chain: true },
  { name: 'full-kind', prepare: fullKindIndex, read: true, chain: true },
  { name: 'no-read', prepare: () => {}, read: false, chain: true },
  { name: 'no-unique', prepare: dropUnique, read: false, chain: true },
  { name: 'blob', prepare: () => {}, read: true, chain: true, blob: true },
  { name: 'no-kind', prepare: noKindIndex, read: true, chain: true },
  { name: 'no-org', prepare: (db) => db.exec('DROP INDEX audit_entries_organisation_occurred_at_id'), read: true, chain: true },
  {
    name: 'org-seq',
    read: true,
    chain: true,
    prepare: (db) => {
      const sql = db.prepare("SELECT sql FROM sqlite_master WHERE name = 'audit_entries'").pluck().get();
      // The listing indexes as the checkout's migrations made them; the UNIQUE one becomes the key.
      const indexes = db
        .prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit_entries' AND sql IS NOT NULL AND name <> 'audit_entries_organisation_seq_unique'")
        .pluck()
        .all();
      const columns = sql
        .slice(sql.indexOf('(') + 1, sql.lastIndexOf(')'))
        .replace(/\bid text PRIMARY KEY/, 'id text NOT NULL UNIQUE')
        .replace(/\bseq bigint NULL/, 'seq bigint NOT NULL');
      db.exec('DROP TABLE audit_entries');
      db.exec(`CREATE TABLE audit_entries (${columns}, PRIMARY KEY (organisation_id, seq)) WITHOUT ROWID`);
      for (const index of indexes) db.exec(index);
    },
  },
];

const dir = mkdtempSync(path.join(os.tmpdir(), 'cos-audit-storage-'));
const org = randomUUID();
const sides = [];
for (const v of variants) {
  const file = path.join(dir, `${v.name}.sqlite`);
  const store = createSqlStore({ databaseUrl: `sqlite:${file}` });
  await store.migrate();
  await store.close();
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  v.prepare(db);
  const insert = db.prepare(
    'INSERT INTO audit_entries (id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, seq, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const head = db.prepare('SELECT seq, hash FROM audit_entries WHERE organisation_id = ? ORDER BY seq DESC LIMIT 1');
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  let seq = 0;
  let prev = v.blob ? Buffer.alloc(32) : '0'.repeat(64);
  const one = () => {
    begin.run();
    if (v.read) head.get(org);
    const id = randomUUID();
    if (v.chain) {
      seq += 1;
      const hash = createHash('sha256').update(`${prev}${id}`).digest(v.blob ? undefined : 'hex');
      insert.run(id, 'api_key_revoked', Date.now(), org, randomUUID(), 'cos_abcdef', 'operator', seq, prev, hash);
      prev = hash;
    } else {
      insert.run(id, 'api_key_revoked', Date.now(), org, randomUUID(), 'cos_abcdef', 'operator', null, null, null);
    }
    commit.run();
  };
  for (let i = 0; i < PREFILL; i++) one();
  db.pragma('wal_autocheckpoint = 0');
  db.pragma('wal_checkpoint(TRUNCATE)');
  for (let i = 0; i < 100; i++) one();
  const frames = (statSync(`${file}-wal`).size - 32) / (24 + db.pragma('page_size', { simple: true })) / 100;
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.pragma('wal_autocheckpoint = 1000');
  sides.push({ name: v.name, db, one, frames });
}

await runPairedBlocks(sides, { blocks, size });
process.stdout.write(`SQLite audit append, ${blocks} blocks of ${size} transactions per variant: CPU µs (system µs), ×first, WAL frames per commit\n`);
for (const side of sides) {
  const f = pairedFigures(side, sides[0]);
  process.stdout.write(`  ${side.name.padEnd(10)} ${f.cpuUs.toFixed(1).padStart(7)} (${f.sysUs.toFixed(1).padStart(5)})  ×${f.ratio.toFixed(3)}  ${side.frames.toFixed(2)}\n`);
  side.db.close();
}
rmSync(dir, { recursive: true, force: true });
