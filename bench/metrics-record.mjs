#!/usr/bin/env node
// What recording one request's metrics costs (no HTTP): CPU time of this process (user + system) per
// record, a record being what the API pipeline reports for one answered request: httpRequest (the
// request counter and the duration histogram) and one rate-limit decision.
//
//   node bench/metrics-record.mjs [--records 1000000] [--warmup 200000] [--runs 5] [--module FILE] [--json]
//
// --module: the built metrics file measured (default: packages/cli/dist/metrics.js of this checkout;
// `pnpm build` first), so the same script measures another build's. Records cycle through 12 routes,
// 4 statuses and durations spread over the buckets; each run is timed alone and the best is reported.
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { ROOT } from './lib/resolve.mjs';

const { values: opt } = parseArgs({
  options: {
    records: { type: 'string', default: '1000000' },
    warmup: { type: 'string', default: '200000' },
    runs: { type: 'string', default: '5' },
    module: { type: 'string', default: path.join(ROOT, 'packages', 'cli', 'dist', 'metrics.js') },
    json: { type: 'boolean', default: false },
  },
});
const records = Number(opt.records);
const { createPrometheusMetrics } = await import(pathToFileURL(path.resolve(opt.module)).href);
const metrics = createPrometheusMetrics();

const ROUTES = Array.from({ length: 12 }, (_, i) => `/v1/organisations/:organisationId/resource-${i}`);
const METHODS = ['GET', 'POST', 'PATCH', 'DELETE'];
const STATUSES = [200, 201, 404, 429];
const SECONDS = [0.0004, 0.0012, 0.003, 0.007, 0.02, 0.04, 0.2, 1.5];
const SCOPES = ['organisation', 'unauthenticated'];
const DECISIONS = ['allowed', 'allowed', 'allowed', 'limited'];

function record(n) {
  for (let i = 0; i < n; i++) {
    metrics.httpRequest(METHODS[i & 3], ROUTES[i % 12], STATUSES[(i >> 2) & 3], SECONDS[i & 7]);
    metrics.rateLimitDecision(SCOPES[i & 1], DECISIONS[(i >> 1) & 3]);
  }
}

record(Number(opt.warmup));
const perRecord = [];
for (let run = 0; run < Number(opt.runs); run++) {
  const start = process.cpuUsage();
  record(records);
  const used = process.cpuUsage(start);
  perRecord.push((used.user + used.system) / records);
}
// The exposition is rendered once, so a build that defers work to the scrape pays for it here too.
const scrapeStart = process.cpuUsage();
const text = await metrics.render();
const scrape = process.cpuUsage(scrapeStart);
const result = {
  module: path.relative(ROOT, path.resolve(opt.module)),
  records,
  cpuUsPerRecordBest: Math.min(...perRecord),
  cpuUsPerRecordRuns: perRecord.map((v) => Number(v.toFixed(4))),
  scrapeCpuMs: (scrape.user + scrape.system) / 1000,
  exposedSeries: text.split('\n').filter((l) => l.startsWith('cos_')).length,
};
if (opt.json) console.log(JSON.stringify(result));
else console.log(`${result.module}: ${result.cpuUsPerRecordBest.toFixed(4)} cpu us/record (runs ${result.cpuUsPerRecordRuns.join(', ')}), scrape ${result.scrapeCpuMs.toFixed(1)} cpu ms, ${result.exposedSeries} cos_ series`);
