/**
 * `cos-admin serve --workers N` (node:cluster): the memory budget and heap limit each worker gets
 * (memory-limit.ts, as functions), then real processes, because signals, one shared port, exit
 * codes and replaced processes are the subject: two workers answer on one port (the request log
 * lines and the metrics' `worker` label name both), the heap limit derived from MEMORY_LIMIT_MB
 * reaches them (their start-up lines state V8's limit), a killed worker is replaced while /readyz
 * goes 503 and back to 200, SIGTERM lets an in-flight request finish and exits 0, and more than one
 * worker without Redis is refused before anything starts.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { cgroupMemoryLimitMb, DEFAULT_MB_PER_WORKER, MIN_OLD_SPACE_MB, operatorHeapFlag, planMemory, PRIMARY_RESERVE_MB, WORKER_OUTSIDE_HEAP_MB } from '../src/memory-limit.js';
import { ensureBuilt, printedKeys, runCli, startServe, tempDir, type ServeProcess } from './support/cli.js';
import { databaseTargets, type TestDatabase } from './support/databases.js';
import { sample } from './support/prometheus.js';

describe('serve workers: the memory budget (MEMORY_LIMIT_MB, cgroup, default)', () => {
  it('MEMORY_LIMIT_MB wins; the primary keeps its reserve, each worker its share less what it holds outside the old space', () => {
    const plan = planMemory({ configuredMb: 1024, workers: 2, cgroupMb: 4096 });
    expect(plan).to.deep.equal({ limitMb: 1024, source: 'MEMORY_LIMIT_MB', oldSpaceMb: (1024 - PRIMARY_RESERVE_MB) / 2 - WORKER_OUTSIDE_HEAP_MB, belowMinimum: false });
    expect(planMemory({ configuredMb: null, workers: 4, cgroupMb: 2048 })).to.include({ limitMb: 2048, source: 'cgroup' });
    const dflt = planMemory({ configuredMb: null, workers: 3, cgroupMb: null });
    expect(dflt).to.include({ source: 'default', limitMb: PRIMARY_RESERVE_MB + 3 * DEFAULT_MB_PER_WORKER, oldSpaceMb: DEFAULT_MB_PER_WORKER - WORKER_OUTSIDE_HEAP_MB });
  });

  it('a budget too small for the workers gives each the smallest heap and says so', () => {
    expect(planMemory({ configuredMb: 256, workers: 4, cgroupMb: null })).to.deep.equal({ limitMb: 256, source: 'MEMORY_LIMIT_MB', oldSpaceMb: MIN_OLD_SPACE_MB, belowMinimum: true });
  });

  it('the cgroup limit: v2 memory.max, v1 memory.limit_in_bytes; "max", a huge v1 value or one above the machine is none', () => {
    const dir = tempDir('cos-cgroup-');
    try {
      const machine = 8 * 2 ** 30;
      expect(cgroupMemoryLimitMb(dir.dir, machine), 'no files').to.equal(null);
      mkdirSync(join(dir.dir, 'memory'));
      writeFileSync(join(dir.dir, 'memory', 'memory.limit_in_bytes'), '9223372036854771712\n');
      expect(cgroupMemoryLimitMb(dir.dir, machine), 'v1 unlimited').to.equal(null);
      writeFileSync(join(dir.dir, 'memory', 'memory.limit_in_bytes'), `${512 * 2 ** 20}\n`);
      expect(cgroupMemoryLimitMb(dir.dir, machine), 'v1').to.equal(512);
      writeFileSync(join(dir.dir, 'memory.max'), 'max\n');
      expect(cgroupMemoryLimitMb(dir.dir, machine), 'v2 unlimited').to.equal(null);
      writeFileSync(join(dir.dir, 'memory.max'), `${768 * 2 ** 20}\n`);
      expect(cgroupMemoryLimitMb(dir.dir, machine), 'v2').to.equal(768);
      writeFileSync(join(dir.dir, 'memory.max'), `${16 * 2 ** 30}\n`);
      expect(cgroupMemoryLimitMb(dir.dir, machine), 'above the machine').to.equal(null);
    } finally {
      dir.remove();
    }
  });

  it("the operator's own heap limit (NODE_OPTIONS or the command line) is recognised", () => {
    expect(operatorHeapFlag(['--enable-source-maps'], '--max-old-space-size=300')).to.equal('--max-old-space-size=300');
    expect(operatorHeapFlag(['--max_old_space_size=200'], undefined)).to.equal('--max_old_space_size=200');
    expect(operatorHeapFlag([], '--max-semi-space-size=8')).to.equal(null);
  });
});

async function until<T>(what: () => T | undefined | Promise<T | undefined>, ms: number, label: string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await what();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(label);
    await sleep(25);
  }
}

const readyLine = (s: ServeProcess): Record<string, unknown> | undefined => s.logLines().find((l) => typeof l['msg'] === 'string' && (l['msg'] as string).startsWith('cos ready:'));
const startLines = (s: ServeProcess): Record<string, unknown>[] => s.logLines().filter((l) => typeof l['address'] === 'string');

describe('cos-admin serve --workers 2 (one port, supervised, drained)', function () {
  this.timeout(90_000);
  const redisUrl = process.env['TEST_REDIS_URL'];
  let db: TestDatabase | undefined;
  let s: ServeProcess | undefined;
  let api = '';
  let ops = '';
  let key = '';

  before(async function () {
    this.timeout(180_000);
    if (redisUrl === undefined || redisUrl === '') {
      if (process.env['CI'] === 'true') throw new Error('CI=true but TEST_REDIS_URL is not set: the Redis suites must run in CI');
      this.skip();
    }
    await ensureBuilt();
    db = await databaseTargets()[0]!.create();
    // (416 - 96) / 2 - 64 = 96 MiB of old space per worker.
    s = startServe(['--workers', '2', '--bootstrap'], { DATABASE_URL: db.databaseUrl, REDIS_URL: redisUrl!, PORT: '0', OPS_PORT: '0', MEMORY_LIMIT_MB: '416', RATE_LIMIT_PER_MINUTE: '1000000', UNAUTH_RATE_LIMIT_PER_MINUTE: '1000000' }, db.cwd);
    const started = await s.listening(30_000);
    api = started.url;
    ops = String(started.line['ops']);
    await until(() => readyLine(s!), 30_000, `no "cos ready" line:\n${s.stdout()}\n${s.stderr()}`);
    // The primary's line comes just before the last worker's own start-up line.
    await until(() => (startLines(s!).length === 2 ? true : undefined), 5_000, 'no start-up line of the second worker');
    key = printedKeys(s.stdout())[0]!;
  });
  after(async () => {
    s?.kill();
    await db?.drop();
  });

  it('both workers answer on the one port (request log lines and the metrics name worker 1 and 2); each runs with the heap limit derived from MEMORY_LIMIT_MB', async () => {
    const ready = readyLine(s!)!;
    expect(ready).to.include({ workers: 2, memory_limit_mb: 416, memory_limit_source: 'MEMORY_LIMIT_MB', max_old_space_mb: 96 });
    const lines = startLines(s!);
    expect(lines.map((l) => l['worker']).sort()).to.deep.equal([1, 2]);
    expect(new Set(lines.map((l) => l['pid'])).size, 'two processes').to.equal(2);
    for (const l of lines) {
      expect(l['address'], 'one port').to.equal(api);
      // V8's limit: the 96 MiB old space plus the young generation (3 semi-spaces); unbounded it is ~2-4 GiB here.
      expect(l['heap_limit_mb'] as number).to.be.within(96, 96 + 64);
    }
    // A new connection per request: the primary hands connections to the workers in turn.
    for (let i = 0; i < 8; i += 1) {
      const res = await fetch(`${api}/v1/health`, { headers: { connection: 'close' } });
      expect(res.status).to.equal(200);
    }
    const answered = await until(
      () => {
        const workers = new Set(s!.logLines().filter((l) => l['msg'] === 'request completed').map((l) => l['worker']));
        return workers.size === 2 ? workers : undefined;
      },
      5_000,
      'the request log lines do not name both workers',
    );
    expect([...answered].sort()).to.deep.equal([1, 2]);
    const text = await (await fetch(`${ops}/metrics`)).text();
    const one = sample(text, 'cos_http_requests_total', { route: '/v1/health', status: '200', worker: '1' }) ?? 0;
    const two = sample(text, 'cos_http_requests_total', { route: '/v1/health', status: '200', worker: '2' }) ?? 0;
    expect(one, 'worker 1 counted some').to.be.greaterThan(0);
    expect(two, 'worker 2 counted some').to.be.greaterThan(0);
    expect(one + two).to.equal(8);
    expect(sample(text, 'cos_workers_ready', {})).to.equal(2);
    expect(sample(text, 'process_resident_memory_bytes', { worker: 'primary' })).to.be.greaterThan(0);
    // The shared store's gauge once, without a worker label.
    expect(text.split('\n').filter((l) => l.startsWith('cos_webhook_outbox_pending'))).to.deep.equal(['cos_webhook_outbox_pending 0']);
  });

  it('a killed worker is replaced in its slot (logged with its id, pid and signal); /readyz is 503 until it listens again, and the port keeps answering', async () => {
    expect((await fetch(`${ops}/readyz`)).status).to.equal(200);
    const victim = startLines(s!).find((l) => l['worker'] === 2)!;
    process.kill(victim['pid'] as number, 'SIGKILL');
    const exited = await until(() => s!.logLines().find((l) => l['level'] === 'error' && l['worker_pid'] === victim['pid']), 10_000, 'no line about the killed worker');
    expect(exited).to.include({ worker: 2, signal: 'SIGKILL', code: null });
    expect(exited['worker_id']).to.be.a('number');
    // The replacement is forked at once, but a Node process takes far longer to listen than this probe.
    const probe = await fetch(`${ops}/readyz`);
    expect(probe.status).to.equal(503);
    expect(await probe.text()).to.equal('worker 2 not ready\n');
    expect((await fetch(`${api}/v1/health`)).status, 'worker 1 still answers').to.equal(200);
    const replaced = await until(() => startLines(s!).find((l) => l['worker'] === 2 && l['pid'] !== victim['pid']), 30_000, 'worker 2 was not replaced');
    expect(replaced['address']).to.equal(api);
    expect(s!.logLines().some((l) => l['msg'] === 'worker 2 replaced: listening again')).to.equal(true);
    expect((await fetch(`${ops}/readyz`)).status, 'ready again').to.equal(200);
    const text = await (await fetch(`${ops}/metrics`)).text();
    expect(sample(text, 'cos_worker_restarts_total', { worker: '2' })).to.equal(1);
  });

  it('SIGTERM: readyz 503, a request in flight on either worker is answered, then every worker and the primary exit 0', async () => {
    // A write whose body is still arriving when SIGTERM comes.
    const socket = connect(Number(new URL(api).port), '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let reply = '';
    socket.setEncoding('utf8').on('data', (d: string) => (reply += d));
    const body = JSON.stringify({ name: 'Drained', slug: 'drained' });
    socket.write(`POST /v1/organisations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
    await sleep(200);
    s!.child.kill('SIGTERM');
    expect((await until(async () => ((await fetch(`${ops}/readyz`)).status === 503 ? 503 : undefined), 2_000, 'readyz still 200 after SIGTERM'))).to.equal(503);
    socket.write(body.slice(5));
    await until(() => (/\r\n\r\n\{/.test(reply) ? true : undefined), 5_000, `no answer to the request in flight: ${reply}`);
    expect(reply).to.match(/^HTTP\/1\.1 201 /);
    socket.destroy();
    expect(await s!.exited()).to.deep.equal({ code: 0, signal: null });
    expect(s!.logLines().filter((l) => l['msg'] === 'shut down: pools closed').map((l) => l['worker']).sort()).to.deep.equal([1, 2]);
    // The primary writes nothing once it is stopping (a stalled stdout must not hold its exit): each
    // worker's shutdown line names the signal the primary received.
    expect(s!.logLines().filter((l) => l['signal'] === 'SIGTERM').map((l) => l['worker']).sort()).to.deep.equal([1, 2]);
  });
});

describe('cos-admin serve: more than one worker without Redis is refused', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  before(async () => {
    db = await databaseTargets()[0]!.create();
  });
  after(async () => {
    await db?.drop();
  });

  it('--workers 2 on SQLite without REDIS_URL: usage error (exit 2), one line naming --workers and REDIS_URL; WORKERS=2: exit 1 naming WORKERS; nothing starts', async () => {
    const flag = await runCli(['serve', '--workers', '2'], { DATABASE_URL: db.databaseUrl, PORT: '0' }, db.cwd);
    expect(flag.code).to.equal(2);
    expect(flag.stdout).to.equal('');
    expect(flag.stderr.trim().split('\n')).to.have.length(1);
    expect(flag.stderr).to.match(/^cos-admin: --workers 2 needs REDIS_URL \(or REDIS_CLUSTER_NODES\): without it each worker counts rate limits on its own/);
    const env = await runCli(['serve', '--json'], { DATABASE_URL: db.databaseUrl, PORT: '0', WORKERS: '2' }, db.cwd);
    expect(env.code).to.equal(1);
    expect(JSON.parse(env.stderr)).to.deep.include({ error: 'CONFIG_ERROR' });
    expect(JSON.parse(env.stderr).message).to.match(/^WORKERS=2 needs REDIS_URL/);
    const bad = await runCli(['serve', '--workers', 'many'], { DATABASE_URL: db.databaseUrl, PORT: '0' }, db.cwd);
    expect(bad.code).to.equal(2);
    expect(bad.stderr.trim()).to.equal('cos-admin: --workers must be a whole number from 1 to 64, or auto');
    const badEnv = await runCli(['serve'], { DATABASE_URL: db.databaseUrl, PORT: '0', WORKERS: '0' }, db.cwd);
    expect(badEnv.code).to.equal(1);
    expect(badEnv.stderr).to.include('WORKERS must be a whole number from 1 to 64, or auto');
  });
});
