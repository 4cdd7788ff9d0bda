#!/usr/bin/env node
// What a page of the audit log listed by kind across organisations costs SQLite, per checkout: each
// root's own store migrates its own file, the same log is written into each (better-sqlite3
// directly, one transaction), then pages are read through the store's `AuditLog.list` in blocks
// taken in turns (bench/lib/paired.mjs). Prints per scenario each root's median CPU µs per page and
// the median of the per-block ratios to the first root.
//
//   node bench/audit-kind-listing.mjs --roots A,B[,…] [--entries 200000] [--blocks 10]
//
// The log: one entry per millisecond over 50 organisations; every 50th entry one of the kinds
// other than api_key_issued and api_key_revoked (in turn); of the rest, every third an
// api_key_revoked while the first three quarters of the log last, then none; all others
// api_key_issued. Scenarios (20 entries per page):
//   rare-first      member_added, first page
//   rare-middle     member_added, the page after the middle of the log
//   issued-middle   api_key_issued, the page after the middle of the log (dense: ~2 of 3 entries)
//   revoked-middle  api_key_revoked, the page after the middle of the log (~1 of 3 entries)
//   revoked-tail    api_key_revoked after its last entry: an empty page, the last quarter of the log
//                   between the cursor and the end
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { pairedFigures, runPairedBlocks } from './lib/paired.mjs';

const { values: opt } = parseArgs({
  options: {
    roots: { type: 'string' },
    entries: { type: 'string', default: '200000' },
    blocks: { type: 'string', default: '10' },
  },
});
if (opt.roots === undefined) throw new Error('--roots A,B[,…]: the checkouts to compare');
const rootDirs = opt.roots.split(',').map((r) => path.resolve(r.trim()));
const entries = Number(opt.entries);
const blocks = Number(opt.blocks);
const ORGS = Array.from({ length: 50 }, () => randomUUID());
// Every kind the (first) checkout's core knows, but the two dense ones written below.
const { AUDIT_KINDS } = await import(pathToFileURL(path.join(rootDirs[0], 'packages', 'core', 'dist', 'index.js')).href);
const RARE = AUDIT_KINDS.filter((kind) => kind !== 'api_key_issued' && kind !== 'api_key_revoked');
const T0 = Date.UTC(2026, 0, 1);
const kindOf = (i) => (i % 50 === 0 ? RARE[(i / 50) % RARE.length] : i < entries * 0.75 && i % 3 === 0 ? 'api_key_revoked' : 'api_key_issued');
const ids = Array.from({ length: entries }, () => randomUUID());
const lastRevoked = (() => {
  for (let i = entries - 1; i >= 0; i--) if (kindOf(i) === 'api_key_revoked') return i;
  throw new Error('no api_key_revoked entry');
})();
const middle = Math.floor(entries / 2);
const after = (i) => ({ createdAt: new Date(T0 + i), id: ids[i] });
const scenarios = [
  { name: 'rare-first', filter: { kind: 'member_added' }, after: null, size: 200 },
  { name: 'rare-middle', filter: { kind: 'member_added' }, after: after(middle), size: 200 },
  { name: 'issued-middle', filter: { kind: 'api_key_issued' }, after: after(middle), size: 200 },
  { name: 'revoked-middle', filter: { kind: 'api_key_revoked' }, after: after(middle), size: 200 },
  { name: 'revoked-tail', filter: { kind: 'api_key_revoked' }, after: after(lastRevoked), size: 3 },
];

const dir = mkdtempSync(path.join(os.tmpdir(), 'cos-audit-kind-listing-'));
const roots = [];
for (const [n, root] of rootDirs.entries()) {
  const storeSql = path.join(root, 'packages', 'store-sql');
  const Database = createRequire(path.join(storeSql, 'package.json'))('better-sqlite3');
  const { createSqlStore } = await import(pathToFileURL(path.join(storeSql, 'dist', 'index.js')).href);
  const file = path.join(dir, `${n}.sqlite`);
  const migrator = createSqlStore({ databaseUrl: `sqlite:${file}` });
  await migrator.migrate();
  await migrator.close();
  const db = new Database(file);
  const insert = db.prepare(
    'INSERT INTO audit_entries (id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, seq, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const seqs = new Map();
  db.transaction(() => {
    for (let i = 0; i < entries; i++) {
      const org = ORGS[i % ORGS.length];
      const seq = (seqs.get(org) ?? 0) + 1;
      seqs.set(org, seq);
      const hash = createHash('sha256').update(ids[i]).digest('hex');
      const kind = kindOf(i);
      const key = kind.startsWith('api_key_') ? [randomUUID(), 'cos_abcdef'] : [null, null];
      insert.run(ids[i], kind, T0 + i, org, ...key, kind.startsWith('api_key_') ? 'api_key' : 'operator', seq, '0'.repeat(64), hash);
    }
  })();
  db.close();
  roots.push({ root, store: createSqlStore({ databaseUrl: `sqlite:${file}` }) });
}

process.stdout.write(`SQLite audit listing by kind, ${entries} entries, ${blocks} blocks per scenario, CPU µs per page of 20 (median of blocks), ×first\n`);
for (const s of scenarios) {
  const sides = roots.map(({ root, store }) => ({ root, one: () => store.stores.audit.list(s.filter, { limit: 20, after: s.after }) }));
  for (const side of sides) await side.one();
  await runPairedBlocks(sides, { blocks, size: s.size });
  for (const side of sides) {
    const f = pairedFigures(side, sides[0]);
    process.stdout.write(`  ${s.name.padEnd(15)} ${f.cpuUs.toFixed(1).padStart(9)}  ×${f.ratio.toFixed(3)}  ${side.root}\n`);
  }
}
for (const { store } of roots) await store.close();
rmSync(dir, { recursive: true, force: true });
