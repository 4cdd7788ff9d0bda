/**
 * A throw-away redis-server on a free port of 127.0.0.1, no persistence (a restart starts empty):
 * the test run's own per-worker servers (runner/setup.ts) and the system tests' servers, which a
 * test may freeze, stall or kill (SIGKILL: a crash, not a shutdown) and start again on the same port.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createConnection } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './free-port.js';

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let answer = '';
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      answer += d.toString('utf8');
      if (answer.includes('\r\n')) done(answer.startsWith('+PONG'));
    });
  });
}

/** True when redis-server can be run here (tests that spawn one skip without it, except under CI=true). */
export function redisServerAvailable(): boolean {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  return probe.status === 0 && /Redis server/i.test(probe.stdout);
}

export class RedisServer {
  private child: ChildProcess | null = null;

  private constructor(readonly port: number) {}

  static async start(): Promise<RedisServer> {
    const server = new RedisServer(await freePort());
    await server.startProcess();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.child !== null;
  }

  async startProcess(): Promise<void> {
    if (this.child !== null) return;
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'no', '--enable-debug-command', 'yes', '--loglevel', 'warning'],
      { stdio: 'ignore' },
    );
    this.child = child;
    child.once('exit', () => {
      if (this.child === child) this.child = null;
    });
    const deadline = Date.now() + 10_000;
    while (!(await ping(this.port))) {
      if (this.child === null || Date.now() > deadline) throw new Error(`redis-server did not come up on port ${this.port} (is redis-server installed?)`);
      await sleep(20);
    }
  }

  /** SIGSTOP: Redis keeps its sockets open but answers nothing (a frozen or partitioned host). */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  /** SIGCONT: a frozen Redis resumes. */
  thaw(): void {
    this.child?.kill('SIGCONT');
  }

  /** Blocks the (single-threaded) server for `ms` with DEBUG SLEEP: every client waits meanwhile. */
  stall(ms: number): Promise<void> {
    return this.command(['DEBUG', 'SLEEP', (ms / 1000).toFixed(3)], ms + 2000);
  }

  /** Sends one command on a connection of its own (FLUSHALL, SCRIPT FLUSH, DEBUG SLEEP); resolves on +OK. */
  command(args: readonly string[], timeoutMs = 2000): Promise<void> {
    const command = `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
    return new Promise((resolve, reject) => {
      const socket = createConnection({ host: '127.0.0.1', port: this.port }, () => socket.write(command));
      socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`${args.join(' ')} got no answer`)));
      socket.on('data', (d: Buffer) => {
        socket.destroy();
        if (d.toString('utf8').startsWith('+OK')) resolve();
        else reject(new Error(`${args.join(' ')}: ${d.toString('utf8').trim()}`));
      });
      socket.on('error', reject);
    });
  }

  /**
   * SIGKILL: Redis dies without a goodbye, like a crashed host. The signal goes out before this
   * returns, so a process `exit` handler may call it without waiting.
   */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
    this.child = null;
  }
}
