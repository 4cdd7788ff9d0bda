// Summarises a V8 .cpuprofile (from `node --cpu-prof`): top self-time functions and self time per
// package, as percentages of the non-idle time; or, with --areas, the areas of the hot path in
// profiles that bench/inprocess.mjs --count --profile wrote, in µs per request: each area's share of
// the sampled main-thread time times the CPU time per request (all threads) measured with it.
//
//   node bench/lib/profile.mjs <file.cpuprofile> [top]
//   node bench/lib/profile.mjs --areas <file.cpuprofile>…
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

/**
 * The hot path's areas, first match wins, by the frame's file (shortUrl) or V8's name for it. A
 * sample belongs to the area of the innermost frame that has one; frames of no area (Node's task
 * queues and timers, anonymous builtins) hand their time to their caller's area.
 */
const AREAS = [
  [/^\(garbage collector\)$/, 'GC'],
  [/^\(program\)$/, 'native, unattributed (program)'],
  [/^bench\//, 'bench driver (the in-memory client)'],
  [/^JSON\.|^(stringify|parse)$/, 'JSON'],
  [/^packages\/adapter-koa\/(src|dist)\/(middleware\/dispatch|paths|mount|routes\/)|^@koa\/router|^path-to-regexp/, 'routing and handlers'],
  [/^packages\/adapter-koa\/(src|dist)\/middleware\/(metrics|access-log)|^prom-client/, 'metrics and access log'],
  [/^packages\/core\/(src|dist)\/access\/turn-batch/, 'admission: the turn batch'],
  [/^packages\/core\/(src|dist)\/access\/|^packages\/adapter-koa\/(src|dist)\/middleware\/(authenticate|rate-limit)/, 'admission'],
  [/^packages\/core\//, 'core (other)'],
  [/^packages\/limiter-redis\/|^@redis\/|^redis\//, 'Redis client / RESP'],
  [/^packages\/store-sql\/|^pg|^knex\/|^better-sqlite3\//, 'SQL store (pg / SQLite)'],
  [/^pino|^thread-stream|^sonic-boom|^packages\/cli\/(src|dist)\/logger/, 'logging'],
  [/^koa|^packages\/adapter-koa\//, 'Koa and the adapter'],
  [/^node:(_http|http|net|internal\/(streams|http|stream_base|net))|^node:stream|^packages\/cli\//, 'HTTP and sockets (Node, the listener)'],
];

function areaOf(callFrame) {
  const key = callFrame.url ? shortUrl(callFrame.url) : callFrame.functionName;
  for (const [pattern, area] of AREAS) if (pattern.test(key)) return area;
  return null;
}

/**
 * The hot path's areas in a profile of bench/inprocess.mjs: each area's share of the non-idle
 * samples inside the measured window (µs, the profile's own clock), and that share of the CPU time
 * per request measured with it.
 */
export function perRequestAreas(file) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const parentOf = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const areaOfNode = new Map();
  const resolve = (id) => {
    if (areaOfNode.has(id)) return areaOfNode.get(id);
    const node = byId.get(id);
    const own = areaOf(node.callFrame);
    const parent = parentOf.get(id);
    const area = own ?? (parent === undefined ? 'other (event loop, promises, builtins)' : resolve(parent));
    areaOfNode.set(id, area);
    return area;
  };
  const areas = new Map();
  let busyUs = 0;
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]);
    const us = profile.timeDeltas[i] ?? 0;
    at += us;
    if (at < profile.measured.from || at > profile.measured.to) continue;
    if (node.callFrame.functionName === '(idle)') continue;
    busyUs += us;
    const area = resolve(node.id);
    areas.set(area, (areas.get(area) ?? 0) + us);
  }
  const { requests, cpuUsPerRequest } = profile.measured;
  const areaList = [...areas].sort((a, b) => b[1] - a[1]).map(([area, us]) => ({ area, share: us / busyUs, usPerRequest: (cpuUsPerRequest * us) / busyUs }));
  return { sampledUsPerRequest: busyUs / requests, cpuUsPerRequest, areas: areaList };
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

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1]) && process.argv[2] === '--areas') {
  const files = process.argv.slice(3);
  const summaries = files.map((f) => perRequestAreas(f));
  const names = [...new Set(summaries.flatMap((s) => s.areas.map((a) => a.area)))];
  const at = (s, name) => s.areas.find((a) => a.area === name)?.usPerRequest ?? 0;
  console.log(`| area (µs per request) | ${files.map((f) => path.basename(f)).join(' | ')} |`);
  console.log(`|---|${files.map(() => '---:').join('|')}|`);
  for (const name of names) console.log(`| ${name} | ${summaries.map((s) => at(s, name).toFixed(1)).join(' | ')} |`);
  console.log(`| **CPU per request (all threads)** | ${summaries.map((s) => s.cpuUsPerRequest.toFixed(1)).join(' | ')} |`);
  console.log(`| sampled main-thread time per request | ${summaries.map((s) => s.sampledUsPerRequest.toFixed(1)).join(' | ')} |`);
} else if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    console.error('usage: node bench/lib/profile.mjs <file.cpuprofile> [top]');
    process.exit(2);
  }
  console.log(formatProfile(summariseProfile(file, Number(top ?? 20))));
}
