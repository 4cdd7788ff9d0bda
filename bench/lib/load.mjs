// Load generators: wrk (preferred: C, one thread, not the bottleneck on a 2-core box) or
// autocannon (fallback, runs inside the bench's own Node process). Both return the same shape:
//   { rps, p50Ms, p99Ms, requests, non2xx, errors, durationS }
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
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
 * `authorization` (never put on a command line) is either the Authorization header of every request,
 * or a key ring `{ file, next }`: `file` holds header values, one per line, sent in turn — one
 * round-robin over the whole list, whichever connection sends the request — starting at value
 * `next` (0 when absent). The run then sets `next` past every value it may have sent, so that the
 * next run with the same ring carries on where this one stopped: a server loaded with one ring sees
 * one unbroken round-robin across warm-up and measured runs, never a restart at the first value.
 * `post` ({ body, contentType }, optional): every request is a POST of that body (it may hold a key:
 * like `authorization`, it goes through the environment, never the command line); otherwise a GET.
 */
export async function runLoad(generator, { url, durationS, connections, authorization, post }) {
  return generator.name === 'wrk'
    ? runWrk({ url, durationS, connections, authorization, post })
    : runAutocannon({ url, durationS, connections, authorization, post });
}

/** The values of a key ring's file, read once per ring. */
function ringValues(ring) {
  if (!ring.values) {
    ring.values = readFileSync(ring.file, 'utf8').split('\n').filter((line) => line.length > 0);
    if (ring.values.length === 0) throw new Error(`${ring.file} holds no Authorization value`);
  }
  return ring.values;
}
const isRing = (authorization) => authorization !== null && typeof authorization === 'object';

function runWrk({ url, durationS, connections, authorization, post }) {
  // One thread (-t1): the script's counter, hence the round-robin, spans every connection.
  const args = ['-t1', `-c${connections}`, `-d${durationS}s`, '--timeout', '5s', '-s', WRK_SCRIPT, url];
  const ring = isRing(authorization) ? authorization : null;
  const count = ring ? ringValues(ring).length : 0;
  const start = ring ? (ring.next ?? 0) % count : 0;
  const env = {
    ...(ring
      ? { ...process.env, BENCH_AUTH: '', BENCH_AUTH_FILE: ring.file, BENCH_AUTH_START: String(start) }
      : { ...process.env, BENCH_AUTH: authorization ?? '', BENCH_AUTH_FILE: '' }),
    BENCH_BODY: post?.body ?? '',
    BENCH_CONTENT_TYPE: post?.contentType ?? '',
  };
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
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
      // wrk reports completed requests; at most one more per connection was sent when it stopped.
      if (ring) ring.next = (start + r.requests + connections) % count;
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

async function runAutocannon({ url, durationS, connections, authorization, post }) {
  const { default: autocannon } = await import('autocannon');
  const options = { url, connections, duration: durationS, ...(post ? { method: 'POST', body: post.body } : {}) };
  const bodyHeaders = post ? { 'content-type': post.contentType } : {};
  const ring = isRing(authorization) ? authorization : null;
  if (ring) {
    const values = ringValues(ring);
    let n = (ring.next ?? 0) % values.length;
    // One request definition whose setupRequest autocannon calls before every request of every
    // connection (and once per connection when it starts): the counter is shared, so the values go
    // round-robin across all connections. A sequence of N definitions would instead replay the
    // list from its start on each connection.
    options.requests = [
      {
        setupRequest: (request) => {
          const value = values[n];
          n = (n + 1) % values.length;
          ring.next = n;
          return { ...request, headers: { ...request.headers, ...bodyHeaders, authorization: value } };
        },
      },
    ];
  } else {
    options.headers = { ...bodyHeaders, ...(authorization ? { authorization } : {}) };
  }
  const result = await autocannon(options);
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
