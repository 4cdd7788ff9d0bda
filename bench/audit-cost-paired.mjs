#!/usr/bin/env node
// The audit-cost loop (bench/audit-cost.mjs) with several builds in ONE process, for a machine
// whose load moves more between two runs than the difference being measured: each build gets its
// own container on its own SQLite file, then the builds take turns, one block of operations each
// (order reversed every other round), and the CPU time of the process is taken per block. Prints
// each build's median CPU µs per operation and the median of the per-block ratios to the first.
//
//   node bench/audit-cost-paired.mjs --roots BASE,OTHER[,…] [--op revoke|issue] [--blocks 30] [--size 100]
//
// Each root is a checkout with its packages built (`pnpm build`). SQLite only.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { pairedFigures, runPairedBlocks } from './lib/paired.mjs';

const { values: opt } = parseArgs({
  options: {
    roots: { type: 'string' },
    op: { type: 'string', default: 'revoke' },
    blocks: { type: 'string', default: '30' },
    size: { type: 'string', default: '100' },
  },
});
if (opt.roots === undefined) throw new Error('--roots BASE,OTHER[,…]: the checkouts to compare');
if (opt.op !== 'revoke' && opt.op !== 'issue') throw new Error(`--op: ${opt.op} (revoke, issue)`);
const blocks = Number(opt.blocks);
const size = Number(opt.size);
const WARMUP = 300;

const sides = [];
for (const root of opt.roots.split(',').map((r) => path.resolve(r.trim()))) {
  const cli = await import(pathToFileURL(path.join(root, 'packages', 'cli', 'dist', 'index.js')).href);
  const core = await import(pathToFileURL(path.join(root, 'packages', 'core', 'dist', 'index.js')).href);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cos-audit-paired-'));
  const total = blocks * size + WARMUP;
  const config = cli.loadConfig(
    { DATABASE_URL: `sqlite:${path.join(dir, 'cos.sqlite')}`, LOG_LEVEL: 'warn', MAX_ACTIVE_KEYS_PER_ORG: String(total + 10) },
    { envFile: false },
  );
  const container = await cli.buildContainer(config, { logger: core.silentLogger });
  await cli.storeOf(container).migrate();
  const c = cli.coreOf(container);
  const org = await c.organisations.create(core.OPERATOR, { name: 'Audit cost', slug: `audit-paired-${Date.now()}` });
  const issue = () => c.apiKeys.issue(core.OPERATOR, org.id, { label: 'audit cost' });
  const ids = [];
  if (opt.op === 'revoke') for (let i = 0; i < total; i++) ids.push((await issue()).key.id);
  const one = opt.op === 'revoke' ? (i) => c.apiKeys.revoke(core.OPERATOR, org.id, ids[i]) : () => issue();
  for (let i = 0; i < WARMUP; i++) await one(i);
  sides.push({ root, dir, cli, container, one });
}

await runPairedBlocks(sides, { blocks, size, start: WARMUP });
process.stdout.write(`SQLite ${opt.op}, ${blocks} blocks of ${size} per build, CPU µs per operation (median of blocks)\n`);
for (const side of sides) {
  const f = pairedFigures(side, sides[0]);
  process.stdout.write(`  ${f.cpuUs.toFixed(1).padStart(8)}  ×${f.ratio.toFixed(3)}  ${side.root}\n`);
}
for (const side of sides) {
  await side.cli.closeContainer(side.container);
  rmSync(side.dir, { recursive: true, force: true });
}
