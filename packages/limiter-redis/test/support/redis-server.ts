/**
 * Real redis-server processes for the fault tests: started on a free port, killed, frozen and
 * restarted by the tests themselves. No mocks: every failure is the real thing the client sees.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { freePort } from '@cos/test-support/free-port';

export { freePort };

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? 'redis-server';

/** True when redis-server can be run here. */
export function redisServerAvailable(): boolean {
  const probe = spawnSync(REDIS_SERVER_BIN, ['--version'], { encoding: 'utf8' });
  return probe.status === 0 && /Redis server/i.test(probe.stdout);
}

/**
 * Registers a suite that needs a spawned redis-server. Outside CI a machine without one skips the
 * suite (with a visible pending test); under CI=true a missing redis-server fails loudly.
 */
export function describeWithRedisServer(title: string, body: (this: Mocha.Suite) => void): void {
  if (redisServerAvailable()) {
    describe(title, body);
    return;
  }
  describe(title, () => {
    if (process.env.CI === 'true') {
      it('needs redis-server (CI=true: this must not be skipped)', () => {
        throw new Error(`${REDIS_SERVER_BIN} not found; install redis-server or set REDIS_SERVER_BIN`);
      });
    } else {
      it(`needs ${REDIS_SERVER_BIN} on PATH (skipped outside CI)`);
    }
  });
}

/** Every child still running; killed when the test process exits, whatever happened. */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const proc of children) proc.kill('SIGKILL');
});

/** A redis-server child process on 127.0.0.1:<port>, no persistence (a restart starts empty). */
export class RedisServer {
  #proc: ChildProcess | undefined;
  #stopped = true;

  private constructor(readonly port: number) {}

  /** Starts a server on a free port (or the given one) and waits until it answers PING. */
  static async start(port?: number): Promise<RedisServer> {
    const server = new RedisServer(port ?? (await freePort()));
    await server.start();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.#proc?.pid;
  }

  get running(): boolean {
    return !this.#stopped;
  }

  /** (Re)starts the process on the same port: an empty server with an empty script cache. */
  async start(): Promise<void> {
    if (!this.#stopped) throw new Error(`redis-server on ${this.port} is already running`);
    const proc = spawn(
      REDIS_SERVER_BIN,
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    proc.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    proc.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    this.#proc = proc;
    this.#stopped = false;
    children.add(proc);
    const exited = new Promise<never>((_, reject) =>
      proc.once('exit', (code, signal) => {
        children.delete(proc);
        this.#stopped = true;
        reject(new Error(`redis-server on ${this.port} exited (${code ?? signal}): ${output.trim()}`));
      }),
    );
    exited.catch(() => undefined);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const ok = await Promise.race([this.ping(), exited]);
      if (ok) return;
      if (Date.now() > deadline) {
        await this.kill();
        throw new Error(`redis-server on ${this.port} did not answer within 10 s: ${output.trim()}`);
      }
      await sleep(20);
    }
  }

  /** SIGKILL: the process dies without a word, as in a crash. */
  async kill(): Promise<void> {
    await this.#signalAndWait('SIGKILL');
  }

  /** SIGTERM and wait for the exit. */
  async stop(): Promise<void> {
    if (this.#proc && !this.#stopped) this.#proc.kill('SIGCONT'); // a frozen server cannot exit
    await this.#signalAndWait('SIGTERM');
  }

  /** SIGSTOP: the process stays, its sockets stay open, nothing answers. */
  freeze(): void {
    if (!this.#proc || this.#stopped) throw new Error('redis-server is not running');
    this.#proc.kill('SIGSTOP');
    // kill() returns once the signal is queued, not once the process has stopped: wait for the
    // kernel to show it stopped, so no command sent after freeze() can still be served.
    waitForState(this.#proc.pid, (state) => state === 'T' || state === 't');
  }

  /** SIGCONT after freeze(). */
  thaw(): void {
    if (!this.#proc || this.#stopped) throw new Error('redis-server is not running');
    this.#proc.kill('SIGCONT');
  }

  /** True when a fresh connection gets PONG within 500 ms. */
  async ping(): Promise<boolean> {
    const client = createClient({ url: this.url, socket: { connectTimeout: 500, reconnectStrategy: false } });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return (await client.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      client.destroy();
    }
  }

  async #signalAndWait(signal: NodeJS.Signals): Promise<void> {
    const proc = this.#proc;
    if (!proc || this.#stopped) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill(signal);
    await exited;
    this.#stopped = true;
  }
}

/** An admin connection for the tests' own commands (INFO, SCRIPT FLUSH, CLIENT PAUSE, PTTL). */
export async function adminClient(url: string) {
  const client = createClient({ url, socket: { reconnectStrategy: false } });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}
export type AdminClient = Awaited<ReturnType<typeof adminClient>>;

/** `calls` of every cmdstat_<name> line of INFO commandstats, e.g. { evalsha: 61, eval: 1 }. */
export async function commandCalls(admin: AdminClient): Promise<Record<string, number>> {
  const info = await admin.info('commandstats');
  const calls: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[m[1]!] = Number(m[2]);
  return calls;
}

/** How many times the counter's script ran (EVALSHA plus the EVAL fallback). */
export async function scriptCalls(admin: AdminClient): Promise<number> {
  const calls = await commandCalls(admin);
  return (calls.evalsha ?? 0) + (calls.eval ?? 0);
}

/** A key prefix no other test (or earlier run against a shared Redis) uses. */
export function uniquePrefix(): string {
  return `rl-test-${randomUUID()}`;
}

/** Waits until `condition()` holds, polling every 10 ms; throws after `ms`. */
export async function waitFor(condition: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** Spins (at most 2 s) until /proc/<pid>/stat shows a state that `ok` accepts; a test-only helper. */
function waitForState(pid: number | undefined, ok: (state: string) => boolean): void {
  if (pid === undefined) return;
  const until = Date.now() + 2_000;
  while (Date.now() < until) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      return; // no /proc (not Linux): nothing to wait for
    }
    // "pid (comm) S ...": the state follows the last ')' (comm may hold spaces and parentheses).
    if (ok(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3))) return;
  }
  throw new Error(`process ${pid} did not reach the expected state within 2 s`);
}
