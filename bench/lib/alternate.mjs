// A B, B A, A B…: both sides get a warm-up, then `rounds` rounds of one run per side, the order
// swapped every round so that neither side always runs first (a side still warming up, or a
// machine drifting, would otherwise favour one side); medians per side; ratios A/B.
import { runLoad } from './load.mjs';

export function median(values) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

function summarise(runs) {
  return {
    runs,
    rps: median(runs.map((r) => r.rps)),
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
    cpuUsPerReq: median(runs.map((r) => r.cpuUsPerReq)),
  };
}

/**
 * Checks one run's answers. expect '2xx': every answer 2xx. expect '429': every answer non-2xx
 * except at most `allowance` (an organisation gets its limit's worth of 200s again at each new
 * UTC minute). Transport errors are never accepted.
 */
function check(side, result) {
  if (result.errors > 0) throw new Error(`${side.label}: ${result.errors} socket errors/timeouts during the run`);
  if (result.requests === 0) throw new Error(`${side.label}: no request completed`);
  if ((side.expect ?? '2xx') === '2xx' && result.non2xx > 0) {
    throw new Error(`${side.label}: ${result.non2xx} of ${result.requests} answers were not 2xx`);
  }
  if (side.expect === '429' && result.requests - result.non2xx > (side.allowance ?? 0)) {
    throw new Error(`${side.label}: ${result.requests - result.non2xx} answers were 2xx, expected 429s`);
  }
}

/**
 * a, b: { label, url, authorization?, post?, expect?, allowance?, target? }. Returns medians per side and
 * the ratios a/b of throughput and of p99 latency.
 */
export async function alternate(generator, { a, b, rounds, durationS, warmupS, connections, log }) {
  const run = async (side, seconds) => {
    const cpu0 = side.process?.cpuSeconds();
    const r = await runLoad(generator, { url: side.url, durationS: seconds, connections, authorization: side.authorization, post: side.post });
    const cpu1 = side.process?.cpuSeconds();
    // CPU time the server process spent per answered request: unlike req/s, it barely moves when
    // other processes compete for the cores.
    r.cpuUsPerReq = cpu0 != null && cpu1 != null ? ((cpu1 - cpu0) * 1e6) / r.requests : NaN;
    check(side, r);
    return r;
  };
  if (warmupS > 0) {
    for (const side of [a, b]) {
      const r = await run(side, warmupS);
      log?.(`    warm-up ${side.label.padEnd(28)} ${fmt(r)}`);
    }
  }
  const runsA = [];
  const runsB = [];
  for (let i = 0; i < rounds; i++) {
    const order = [
      [a, runsA],
      [b, runsB],
    ];
    if (i % 2 === 1) order.reverse();
    for (const [side, runs] of order) {
      const r = await run(side, durationS);
      runs.push(r);
      log?.(`    ${String(i + 1).padStart(2)}/${rounds} ${side.label.padEnd(28)} ${fmt(r)}`);
    }
  }
  const A = summarise(runsA);
  const B = summarise(runsB);
  return { a: A, b: B, ratio: { rps: A.rps / B.rps, p99: A.p99Ms / B.p99Ms, cpu: B.cpuUsPerReq / A.cpuUsPerReq } };
}

export function fmt(r) {
  const cpu = Number.isFinite(r.cpuUsPerReq) ? `  cpu ${r.cpuUsPerReq.toFixed(0)} µs/req` : '';
  return `${r.rps.toFixed(0).padStart(7)} req/s  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms${cpu}`;
}
