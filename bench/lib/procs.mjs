// Child processes of the bench: the real service (`node packages/cli/dist/main.js serve`), the bare
// Koa baseline, and one-shot `cos-admin` commands. Only processes started here are ever signalled.
import { spawn, spawnSync } from 'node:child_process';
import { openSync, closeSync, readFileSync, readdirSync, renameSync, statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { CLI_MAIN, ROOT } from './resolve.mjs';

/** A TCP port that was free a moment ago on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** CPU time (user + system) a live process has used so far, in seconds; null without /proc. */
export function cpuSecondsOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[11], fields[12] = utime, stime (fields 14 and 15 of proc(5)), in clock ticks
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return null;
  }
}
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;

/** VmHWM (peak RSS) and VmRSS of a live process, in MiB; null when /proc is not there. */
export function memoryOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { hwmMiB: kb('VmHWM') / 1024, rssMiB: kb('VmRSS') / 1024 };
  } catch {
    return null;
  }
}

/** The pids of a process's children (serve's workers), from /proc; [] when unknown. */
export function childPidsOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * Memory of `serve`: its primary and its workers, each process on its own (the target is per
 * process). hwmMiB is the largest worker's peak (the primary's own when it has no child).
 */
function serviceMemoryOf(pid) {
  const primary = memoryOf(pid);
  if (primary === null) return null;
  const workers = childPidsOf(pid).map(memoryOf).filter((m) => m !== null);
  if (workers.length === 0) return { ...primary, primaryHwmMiB: null, workerHwmMiB: [] };
  const peak = workers.reduce((a, b) => (b.hwmMiB > a.hwmMiB ? b : a));
  return { hwmMiB: peak.hwmMiB, rssMiB: peak.rssMiB, primaryHwmMiB: primary.hwmMiB, workerHwmMiB: workers.map((w) => w.hwmMiB) };
}

/** CPU seconds of a process and its children (serve's primary and workers) so far; null without /proc. */
function serviceCpuSecondsOf(pid) {
  const own = cpuSecondsOf(pid);
  if (own === null) return null;
  return childPidsOf(pid).reduce((sum, child) => sum + (cpuSecondsOf(child) ?? 0), own);
}

async function waitReady(url, child, logFile, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${url} exited early (${child.exitCode ?? child.signalCode}); log: ${tail(logFile)}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = String(err?.cause?.code ?? err?.message ?? err);
    }
    await sleep(100);
  }
  throw new Error(`${url} not ready within ${timeoutMs} ms (${last}); log: ${tail(logFile)}`);
}

function tail(file, lines = 15) {
  try {
    return '\n' + readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

function spawnLogged(args, { env, logFile, cwd = ROOT }) {
  const fd = openSync(logFile, 'a');
  const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  return child;
}

async function stopChild(child, graceMs = 15_000) {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = new Promise((r) => child.once('exit', (code) => r(code)));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  const code = await exited;
  clearTimeout(timer);
  return code;
}

/**
 * Starts `cos-admin serve` as a child process. `env` adds to a minimal environment (the parent's
 * DATABASE_URL/REDIS_URL never leak in). With `profileDir`, node writes a .cpuprofile there on exit.
 */
export async function startService({ name, env, logFile, profileDir, nodeArgs = [], serveArgs = [], readyz = false }) {
  const port = await freePort();
  // With readyz: the operations listener on, and the service counted ready when /readyz says every worker is.
  const opsPort = readyz ? await freePort() : null;
  const childEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'warn',
    UNAUTH_RATE_LIMIT_PER_MINUTE: '1000000000',
    ...(process.env.BENCH_SERVICE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVICE_NODE_OPTIONS } : {}),
    ...env,
    ...(opsPort === null ? {} : { OPS_PORT: String(opsPort) }),
  };
  const args = [...nodeArgs];
  // serve's workers inherit the flags: each process writes its own profile into a directory of this
  // service; stop() keeps the largest (a worker's: the primary answers no request) as <name>.cpuprofile.
  const ownProfiles = profileDir ? path.join(profileDir, name) : null;
  if (ownProfiles) args.push('--cpu-prof', `--cpu-prof-dir=${ownProfiles}`);
  args.push(CLI_MAIN, 'serve', ...serveArgs);
  const child = spawnLogged(args, { env: childEnv, logFile });
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitReady(`${base}/v1/health`, child, logFile);
    // The port answers once the first worker listens; /readyz once every worker does.
    if (opsPort !== null) await waitReady(`http://127.0.0.1:${opsPort}/readyz`, child, logFile);
  } catch (err) {
    await stopChild(child, 2000);
    throw err;
  }
  return {
    name,
    base,
    pid: child.pid,
    logFile,
    memory: () => serviceMemoryOf(child.pid),
    cpuSeconds: () => serviceCpuSecondsOf(child.pid),
    stop: async () => {
      const code = await stopChild(child);
      if (ownProfiles) {
        const largest = cpuProfilesIn(ownProfiles).sort((a, b) => statSync(b).size - statSync(a).size)[0];
        if (largest) renameSync(largest, path.join(profileDir, `${name}.cpuprofile`));
      }
      return code;
    },
  };
}

/**
 * Starts the bare Koa baseline answering `bodyFile`'s JSON on GET /v1/organisations/:id (and
 * `introspectionFile`'s on POST /v1/introspect); with `plain`, node:http alone answers them.
 */
export async function startBaseline({ bodyFile, introspectionFile, logFile, plain = false }) {
  const port = await freePort();
  const child = spawnLogged([path.join(ROOT, 'bench', 'baseline.mjs'), '--port', String(port), '--body', bodyFile, ...(introspectionFile ? ['--introspection', introspectionFile] : []), ...(plain ? ['--plain'] : [])], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' },
    logFile,
  });
  const base = `http://127.0.0.1:${port}`;
  await waitReady(`${base}/v1/health`, child, logFile);
  return {
    name: plain ? 'bare-node' : 'bare-koa',
    base,
    pid: child.pid,
    memory: () => memoryOf(child.pid),
    cpuSeconds: () => cpuSecondsOf(child.pid),
    stop: () => stopChild(child),
  };
}

/** Runs `cos-admin <args> --json` to completion and returns its parsed stdout. Throws with stderr. */
export function cosAdmin(args, env) {
  const res = spawnSync(process.execPath, [CLI_MAIN, ...args, '--json'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn', ...env },
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (res.status !== 0) {
    throw new Error(`cos-admin ${args[0]} ${args[1] ?? ''} failed (exit ${res.status}): ${(res.stderr || res.stdout).trim()}`);
  }
  try {
    return JSON.parse(res.stdout);
  } catch {
    throw new Error(`cos-admin ${args.join(' ')} printed no JSON: ${res.stdout.slice(0, 200)}`);
  }
}

export function cpuProfilesIn(dir) {
  try {
    return readdirSync(dir)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => path.join(dir, f));
  } catch {
    return [];
  }
}
