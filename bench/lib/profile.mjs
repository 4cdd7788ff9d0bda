// Summarises a V8 .cpuprofile (from `node --cpu-prof`): top self-time functions and self time per
// package, as percentages of the non-idle time.
//
//   node bench/lib/profile.mjs <file.cpuprofile> [top]
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT } from './resolve.mjs';

function shortUrl(url) {
  if (!url) return '';
  let p = url.startsWith('file://') ? fileURLToPath(url) : url;
  if (p.startsWith(ROOT + path.sep)) p = p.slice(ROOT.length + 1);
  // pnpm store paths: keep only the package-relative part
  const nm = p.lastIndexOf('node_modules/');
  if (nm >= 0) p = p.slice(nm + 'node_modules/'.length);
  return p;
}

function bucketOf(url, functionName) {
  if (!url) {
    if (functionName === '(garbage collector)') return 'GC';
    if (functionName === '(program)') return '(program: native, unattributed)';
    if (functionName === '(idle)') return '(idle)';
    return 'native / builtins';
  }
  const p = shortUrl(url);
  const pkg = /^packages\/([^/]+)\//.exec(p);
  if (pkg) return `@cos/${pkg[1]}`;
  if (p.startsWith('node:')) return 'node core (' + p.split('/').slice(0, 2).join('/') + ')';
  if (p.startsWith('.pnpm/')) {
    const m = /^\.pnpm\/[^/]+\/node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(p);
    if (m) return m[1];
  }
  const m = /^((?:@[^/]+\/)?[^/]+)\//.exec(p);
  return m ? m[1] : p;
}

/** Self time (ms) per function and per bucket; `totalMs` excludes "(idle)". */
export function summariseProfile(file, top = 15) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const fns = new Map();
  const buckets = new Map();
  let totalUs = 0;
  let idleUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    const cf = node.callFrame;
    const name = cf.functionName || '(anonymous)';
    if (name === '(idle)') {
      idleUs += us;
      continue;
    }
    totalUs += us;
    const where = cf.url ? `${shortUrl(cf.url)}:${cf.lineNumber + 1}` : '';
    const key = `${name}\u0000${where}`;
    fns.set(key, (fns.get(key) ?? 0) + us);
    const bucket = bucketOf(cf.url, name);
    buckets.set(bucket, (buckets.get(bucket) ?? 0) + us);
  }
  const pct = (us) => (totalUs > 0 ? (100 * us) / totalUs : 0);
  const functions = [...fns]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([key, us]) => {
      const [name, where] = key.split('\u0000');
      return { name, where, selfMs: us / 1000, pct: pct(us) };
    });
  const packages = [...buckets]
    .sort((a, b) => b[1] - a[1])
    .map(([bucket, us]) => ({ bucket, selfMs: us / 1000, pct: pct(us) }));
  return { file, busyMs: totalUs / 1000, idleMs: idleUs / 1000, functions, packages };
}

export function formatProfile(summary, { topPackages = 10 } = {}) {
  const lines = [];
  lines.push(`busy ${summary.busyMs.toFixed(0)} ms, idle ${summary.idleMs.toFixed(0)} ms`);
  lines.push('');
  lines.push('| self % | self ms | function | where |');
  lines.push('|---:|---:|---|---|');
  for (const f of summary.functions) {
    lines.push(`| ${f.pct.toFixed(1)} | ${f.selfMs.toFixed(0)} | \`${f.name}\` | ${f.where ? `\`${f.where}\`` : ''} |`);
  }
  lines.push('');
  lines.push('| self % | package / area |');
  lines.push('|---:|---|');
  for (const p of summary.packages.slice(0, topPackages)) lines.push(`| ${p.pct.toFixed(1)} | ${p.bucket} |`);
  return lines.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    console.error('usage: node bench/lib/profile.mjs <file.cpuprofile> [top]');
    process.exit(2);
  }
  console.log(formatProfile(summariseProfile(file, Number(top ?? 20))));
}
