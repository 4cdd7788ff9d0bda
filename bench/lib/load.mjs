// Load generators: wrk (preferred: C, one thread, not the bottleneck on a 2-core box) or
// autocannon (fallback, runs inside the bench's own Node process). Both return the same shape:
//   { rps, p50Ms, p99Ms, requests, non2xx, errors, durationS }
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { ROOT } from './resolve.mjs';

const WRK_SCRIPT = path.join(ROOT, 'bench', 'lib', 'wrk-report.lua');

/** 'wrk' when the binary answers, else 'autocannon'; BENCH_LOADGEN=wrk|autocannon forces one. */
export function detectLoadGenerator() {
  const forced = process.env.BENCH_LOADGEN;
  if (forced === 'autocannon') return { name: 'autocannon', version: autocannonVersion() };
  const probe = spawnSync('wrk', ['-v'], { encoding: 'utf8' });
  if (!probe.error) {
    const version = /wrk\s+([\w.-]+)/.exec(`${probe.stdout}${probe.stderr}`)?.[1] ?? 'unknown';
    return { name: 'wrk', version };
  }
  if (forced === 'wrk') throw new Error('BENCH_LOADGEN=wrk but the wrk binary was not found (apt-get install -y wrk)');
  return { name: 'autocannon', version: autocannonVersion() };
}

function autocannonVersion() {
  try {
    const probe = spawnSync(process.execPath, ['-e', "console.log(require('autocannon/package.json').version)"], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    return probe.stdout.trim() || 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * One run against `url` for `durationS` seconds with `connections` keep-alive connections.
 * `authorization` is sent as the Authorization header (never put on a command line).
 */
export async function runLoad(generator, { url, durationS, connections, authorization }) {
  return generator.name === 'wrk'
    ? runWrk({ url, durationS, connections, authorization })
    : runAutocannon({ url, durationS, connections, authorization });
}

function runWrk({ url, durationS, connections, authorization }) {
  const args = ['-t1', `-c${connections}`, `-d${durationS}s`, '--timeout', '5s', '-s', WRK_SCRIPT, url];
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, {
      env: { ...process.env, BENCH_AUTH: authorization ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('BENCH_JSON '));
      if (code !== 0 || !line) {
        reject(new Error(`wrk failed (exit ${code}): ${err.trim() || out.trim()}`));
        return;
      }
      const r = JSON.parse(line.slice('BENCH_JSON '.length));
      const seconds = r.duration_us / 1e6;
      const e = r.errors;
      resolve({
        rps: r.requests / seconds,
        p50Ms: r.latency_us.p50 / 1000,
        p99Ms: r.latency_us.p99 / 1000,
        requests: r.requests,
        non2xx: e.status,
        errors: e.connect + e.read + e.write + e.timeout,
        durationS: seconds,
      });
    });
  });
}

async function runAutocannon({ url, durationS, connections, authorization }) {
  const { default: autocannon } = await import('autocannon');
  const result = await autocannon({
    url,
    connections,
    duration: durationS,
    headers: authorization ? { authorization } : {},
  });
  return {
    rps: result.requests.total / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    durationS: result.duration,
  };
}
