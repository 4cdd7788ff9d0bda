/**
 * C-55 end to end: two service instances (two `cos-admin serve` processes) over one SQLite file and
 * one Redis enforce one limit per organisation. The instances run as separate processes through
 * the operator interface of the contract (cos-admin + environment), so this package imports no
 * other adapter (the dependency rule holds for tests too).
 */
import { expect } from 'chai';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { RedisServer, describeWithRedisServer, freePort, waitFor } from './support/redis-server.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const COS_ADMIN = fileURLToPath(new URL('../../cli/src/main.ts', import.meta.url));
/** Run cos-admin from source, as mocha runs the tests (tsx + the "source" export condition). */
const NODE_ARGS = ['--import', 'tsx', '--conditions', 'source', COS_ADMIN];
const run = promisify(execFile);

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Waits for the start of a minute when fewer than `seconds` are left in the current one. */
async function awayFromMinuteEnd(seconds: number): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < seconds * 1000) await sleep(left + 50);
}

describeWithRedisServer('limiter-redis: two HTTP instances over one store and one Redis', function () {
  this.timeout(90_000);
  let redis: RedisServer;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const instances: ChildProcess[] = [];
  const ports: number[] = [];
  let key: string;
  let orgId: string;

  async function cosAdmin(...args: string[]): Promise<unknown> {
    const { stdout } = await run(process.execPath, [...NODE_ARGS, ...args, '--json'], { cwd: REPO_ROOT, env, timeout: 30_000 });
    return JSON.parse(stdout) as unknown;
  }

  before(async () => {
    redis = await RedisServer.start();
    dir = mkdtempSync(join(tmpdir(), 'cos-limiter-redis-'));
    env = {
      ...process.env,
      DATABASE_URL: `sqlite:${join(dir, 'cos.sqlite')}`,
      REDIS_URL: redis.url,
      // this test is about sharing, not the bound: a slow answer on a loaded machine must not fail open
      REDIS_TIMEOUT_MS: '1000',
      RATE_LIMIT_PER_MINUTE: '60',
      LOG_LEVEL: 'warn',
    };
    await cosAdmin('migrate');
    const boot = (await cosAdmin('bootstrap')) as { organisation: { id: string }; key: { key: string } };
    key = boot.key.key;
    orgId = boot.organisation.id;

    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      const child = spawn(process.execPath, [...NODE_ARGS, 'serve', '--port', String(port)], {
        cwd: REPO_ROOT,
        env: { ...env, HOST: '127.0.0.1', PORT: String(port) },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      child.once('exit', (code) => {
        if (code !== 0 && code !== null) stderr += ` (exit ${code})`;
      });
      instances.push(child);
      ports.push(port);
      await waitFor(async () => {
        if (child.exitCode !== null) throw new Error(`cos-admin serve exited: ${stderr}`);
        return listening(port);
      }, 30_000, `instance ${i + 1} to listen`);
    }
  });

  after(async () => {
    await Promise.all(
      instances.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
          }),
      ),
    );
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function get(instance: number): Promise<Response> {
    return fetch(`http://127.0.0.1:${ports[instance]}/v1/organisations/${orgId}`, {
      headers: { authorization: `Bearer ${key}` },
    });
  }

  it('C-55 + C-51: across both instances requests 1-60 of an organisation in a minute pass and the 61st is 429', async () => {
    await awayFromMinuteEnd(15);
    for (let n = 1; n <= 60; n++) {
      const res = await get(n % 2);
      await res.arrayBuffer();
      expect(res.status, `request ${n}`).to.equal(200);
      expect(res.headers.get('x-ratelimit-limit')).to.equal('60');
      expect(res.headers.get('x-ratelimit-remaining'), `request ${n}`).to.equal(String(60 - n));
    }
    const refused = await get(1);
    expect(refused.status).to.equal(429);
    expect(refused.headers.get('content-type')).to.match(/^application\/problem\+json/);
    expect(refused.headers.get('x-ratelimit-remaining')).to.equal('0');
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).to.be.within(1, 60);
    const body = (await refused.json()) as { status: number; retry_after: number };
    expect(body.status).to.equal(429);
    expect(body.retry_after).to.equal(retryAfter);

    // C-51: so is every later request of that window, on either instance
    for (const instance of [0, 1, 0]) {
      const res = await get(instance);
      await res.arrayBuffer();
      expect(res.status).to.equal(429);
    }
  });
});
