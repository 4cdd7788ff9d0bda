#!/usr/bin/env node
// What issuing and revoking a key costs through the core (no HTTP), on a SQLite file and on Postgres:
// CPU time of this process per operation (user + system) and wall time per operation. Written to
// compare the audit append of two builds (docs/performance.md, "Audit chain"), run alternately:
//
//   node bench/audit-cost.mjs [--store sqlite,postgres] [--ops 2000] [--warmup 100] [--root DIR] [--json]
//
// --root: the checkout whose built packages are measured (default: this one; `pnpm build` first), so
// one script measures an older commit's build too. Postgres: TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test); a scratch database next to it is created and dropped.
// Per store: one organisation, `warmup` issues and revocations, then `ops` issues, then `ops`
// revocations of those keys, each awaited before the next (one unit of work at a time).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { createScratchDatabase } from './lib/infra.mjs';
import { ROOT } from './lib/resolve.mjs';
import { infraUrls } from './lib/session.mjs';

const { values: opt } = parseArgs({
  options: {
    store: { type: 'string', default: 'sqlite,postgres' },
    ops: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '100' },
    root: { type: 'string', default: ROOT },
    json: { type: 'boolean', default: false },
  },
});
const ops = Number(opt.ops);
const warmup = Number(opt.warmup);
const root = path.resolve(opt.root);
const cli = await import(pathToFileURL(path.join(root, 'packages', 'cli', 'dist', 'index.js')).href);
const core = await import(pathToFileURL(path.join(root, 'packages', 'core', 'dist', 'index.js')).href);

async function withCore(databaseUrl, fn) {
  const env = {
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'warn',
    // Every key of the run is active at once before the revocations.
    MAX_ACTIVE_KEYS_PER_ORG: String(ops + warmup + 10),
  };
  const config = cli.loadConfig(env, { envFile: false });
  const container = await cli.buildContainer(config, { logger: core.silentLogger });
  try {
    await cli.storeOf(container).migrate();
    return await fn(cli.coreOf(container));
  } finally {
    await cli.closeContainer(container);
  }
}

/** CPU µs and wall µs per call of `op` over `items`. */
async function timed(items, op) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (const item of items) await op(item);
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { cpuUs: (cpu.user + cpu.system) / items.length, wallUs: (wall * 1000) / items.length };
}

async function measure(c) {
  const operator = core.OPERATOR;
  const org = await c.organisations.create(operator, { name: 'Audit cost', slug: `audit-cost-${Date.now()}` });
  const issue = () => c.apiKeys.issue(operator, org.id, { label: 'audit cost' });
  const revoke = (id) => c.apiKeys.revoke(operator, org.id, id);
  const range = (n) => Array.from({ length: n }, (_, i) => i);
  const warm = [];
  for (let i = 0; i < warmup; i++) warm.push((await issue()).key.id);
  for (const id of warm) await revoke(id);
  const ids = [];
  const issued = await timed(range(ops), async () => ids.push((await issue()).key.id));
  const revoked = await timed(ids, revoke);
  return { issue: issued, revoke: revoked };
}

const results = {};
for (const store of opt.store.split(',').map((s) => s.trim())) {
  if (store === 'sqlite') {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cos-audit-cost-'));
    try {
      results.sqlite = await withCore(`sqlite:${path.join(dir, 'cos.sqlite')}`, measure);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  } else if (store === 'postgres') {
    const scratch = await createScratchDatabase(infraUrls().databaseUrl);
    try {
      results.postgres = await withCore(scratch.url, measure);
    } finally {
      await scratch.drop();
    }
  } else {
    throw new Error(`--store: unknown store ${store} (sqlite, postgres)`);
  }
}

if (opt.json) {
  process.stdout.write(`${JSON.stringify({ root, ops, results })}\n`);
} else {
  process.stdout.write(`${root} (${ops} operations each after ${warmup} warm-up)\n`);
  for (const [store, r] of Object.entries(results)) {
    for (const [op, t] of Object.entries(r)) {
      process.stdout.write(`  ${store.padEnd(8)} ${op.padEnd(6)} ${t.cpuUs.toFixed(0).padStart(5)} µs CPU  ${t.wallUs.toFixed(0).padStart(5)} µs wall per operation\n`);
    }
  }
}
