#!/usr/bin/env node
// What `cos-admin db copy` costs (docs/operations.md, "Moving from the embedded default to Postgres"):
// a SQLite source of --orgs organisations, --keys API keys and --audit audit entries (chained per
// organisation by core's own linkAuditEntry, so the copy's verification recomputes real chains) is
// copied into a fresh Postgres database by the built CLI, as an operator runs it. Prints the copy's
// wall time, rows per second, the verification's share and the process's peak RSS.
//
//   npx -y pnpm@10 build && node bench/db-copy.mjs [--orgs 10000] [--keys 100000] [--audit 1000000]
//
// Postgres: TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test); the target database
// cos_bench_copy_<random> is created beside it and dropped afterwards.
import { spawn } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';

const { values: opt } = parseArgs({
  options: {
    orgs: { type: 'string', default: '10000' },
    keys: { type: 'string', default: '100000' },
    audit: { type: 'string', default: '1000000' },
  },
});
const ORGS = Number(opt.orgs);
const KEYS = Number(opt.keys);
const AUDIT = Number(opt.audit);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const core = await import(pathToFileURL(path.join(root, 'packages/core/dist/index.js')).href);
const storeSql = await import(pathToFileURL(path.join(root, 'packages/store-sql/dist/index.js')).href);
const Database = createRequire(path.join(root, 'packages/store-sql/package.json'))('better-sqlite3');
const cli = path.join(root, 'packages/cli/dist/main.js');

const adminUrl = process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const work = mkdtempSync(path.join(os.tmpdir(), 'cos-bench-copy-'));
const sourceFile = path.join(work, 'cos.sqlite');
const targetName = `cos_bench_copy_${randomBytes(4).toString('hex')}`;
const targetUrl = (() => {
  const u = new URL(adminUrl);
  u.pathname = `/${targetName}`;
  return u.toString();
})();

function log(line) {
  process.stderr.write(`${line}\n`);
}

// --- the source -------------------------------------------------------------------------------
const made = performance.now();
const store = storeSql.createSqlStore({ databaseUrl: `sqlite:${sourceFile}` });
await store.migrate();
await store.close();
const db = new Database(sourceFile);
db.pragma('journal_mode = WAL');
const orgIds = Array.from({ length: ORGS }, () => randomUUID());
const t0 = Date.parse('2026-01-01T00:00:00Z');
db.transaction(() => {
  const org = db.prepare('INSERT INTO organisations (id, name, slug, industry_section, is_system, created_at, updated_at) VALUES (?, ?, ?, NULL, 0, ?, ?)');
  orgIds.forEach((id, i) => org.run(id, `Organisation ${i}`, `org-${i}`, t0 + i, t0 + i));
  const key = db.prepare('INSERT INTO api_keys (id, organisation_id, label, key_prefix, digest, expires_at, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, NULL, ?, ?)');
  for (let i = 0; i < KEYS; i += 1) {
    key.run(randomUUID(), orgIds[i % ORGS], `key ${i}`, 'svc_live_abc', createHash('sha256').update(`key ${i}`).digest('hex'), t0 + i, i % 10 === 0 ? t0 + i + 1 : null);
  }
})();
const insertAudit = db.prepare(
  'INSERT INTO audit_entries (id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, actor_key_id, actor_name, seq, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)',
);
const heads = new Map();
const CHUNK = 50_000;
for (let done = 0; done < AUDIT; done += CHUNK) {
  db.transaction(() => {
    for (let i = done; i < Math.min(AUDIT, done + CHUNK); i += 1) {
      const entry = {
        id: randomUUID(),
        kind: 'api_key_issued',
        occurredAt: new Date(t0 + i),
        organisationId: orgIds[i % ORGS],
        keyId: randomUUID(),
        keyPrefix: 'svc_live_abc',
        actor: { type: 'operator', name: 'bench' },
      };
      const chained = core.linkAuditEntry(entry, heads.get(entry.organisationId) ?? null);
      heads.set(entry.organisationId, { seq: chained.seq, hash: chained.hash });
      insertAudit.run(entry.id, entry.kind, t0 + i, entry.organisationId, entry.keyId, entry.keyPrefix, 'operator', 'bench', chained.seq, chained.prevHash, chained.hash);
    }
  })();
}
db.close();
log(`source: ${ORGS} organisations, ${KEYS} keys, ${AUDIT} audit entries in ${((performance.now() - made) / 1000).toFixed(1)} s`);

// --- the copy ---------------------------------------------------------------------------------
const admin = storeSql.createSqlStore({ databaseUrl: adminUrl, poolMax: 1, statementTimeoutMs: 60_000 });
await admin.knex.raw(`CREATE DATABASE ${targetName}`);
try {
  const started = performance.now();
  const result = await new Promise((resolve, reject) => {
    // /usr/bin/time -f %M reports the peak RSS (KiB) of the copy process itself.
    const child = spawn('/usr/bin/time', ['-f', 'maxrss_kib=%M', process.execPath, cli, 'db', 'copy', '--to', targetUrl, '--json'], {
      cwd: work,
      env: { ...process.env, DATABASE_URL: `sqlite:${sourceFile}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve({ out, err }) : reject(new Error(`db copy exited ${code}:\n${err}`))));
  });
  const wall = (performance.now() - started) / 1000;
  const summary = JSON.parse(result.out);
  const rss = Number(/maxrss_kib=(\d+)/.exec(result.err)?.[1] ?? NaN) / 1024;
  console.log(
    JSON.stringify({
      organisations: ORGS,
      keys: KEYS,
      audit_entries: AUDIT,
      rows: summary.rows,
      copy_seconds: summary.seconds,
      wall_seconds: Number(wall.toFixed(1)),
      rows_per_second: Math.round(summary.rows / summary.seconds),
      verify_and_start_seconds: Number((wall - summary.seconds).toFixed(1)),
      peak_rss_mib: Number(rss.toFixed(0)),
    }),
  );
} finally {
  await admin.knex.raw(`DROP DATABASE IF EXISTS ${targetName} WITH (FORCE)`);
  await admin.close();
  rmSync(work, { recursive: true, force: true });
}
