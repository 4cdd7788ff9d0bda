/**
 * Real Redis topologies for the tests that need more than one server: a primary with a replica,
 * and a Redis Cluster (three primaries, three replicas, `redis-cli --cluster create`) on loopback
 * ports. Every server is a child process of the test (no persistence), killed when the test
 * process exits whatever happened; `stop()` tears a topology down. Servers take ports in
 * REDIS_TOPOLOGY_PORTS (default 7100-7199; a cluster's bus ports are those + 10000), probing for
 * free ones, so two test runs on one machine do not collide.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { TcpProxy } from './tcp-proxy.js';

const SERVER_BIN = process.env['REDIS_SERVER_BIN'] ?? 'redis-server';
const CLI_BIN = process.env['REDIS_CLI_BIN'] ?? 'redis-cli';
const [PORT_LOW, PORT_HIGH] = (process.env['REDIS_TOPOLOGY_PORTS'] ?? '7100-7199').split('-').map(Number) as [number, number];

/** True when redis-server and redis-cli can be run here. */
export function redisTopologyAvailable(): boolean {
  const server = spawnSync(SERVER_BIN, ['--version'], { encoding: 'utf8' });
  const cli = spawnSync(CLI_BIN, ['--version'], { encoding: 'utf8' });
  return server.status === 0 && cli.status === 0;
}

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const proc of children) proc.kill('SIGKILL');
});

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** Ports handed out by this process (a server that has not bound yet would still probe free). */
const taken = new Set<number>();

/** `count` ports of the range that are free now (their bus port +10000 too when `bus`). */
async function freePorts(count: number, bus: boolean): Promise<number[]> {
  const out: number[] = [];
  const start = PORT_LOW + Math.floor(Math.random() * (PORT_HIGH - PORT_LOW + 1));
  for (let i = 0; i <= PORT_HIGH - PORT_LOW && out.length < count; i++) {
    const port = PORT_LOW + ((start - PORT_LOW + i) % (PORT_HIGH - PORT_LOW + 1));
    if (taken.has(port)) continue;
    if ((await portFree(port)) && (!bus || (await portFree(port + 10_000)))) out.push(port);
  }
  if (out.length < count) throw new Error(`fewer than ${count} free ports in ${PORT_LOW}-${PORT_HIGH}`);
  for (const p of out) taken.add(p);
  return out;
}

/** One redis-server child process on 127.0.0.1. */
export class RedisNode {
  #proc: ChildProcess | undefined;
  #exited = true;

  constructor(
    readonly port: number,
    private readonly args: readonly string[],
    private readonly dir: string,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return !this.#exited;
  }

  async start(): Promise<void> {
    const proc = spawn(SERVER_BIN, ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning', '--repl-diskless-sync-delay', '0', '--dir', this.dir, ...this.args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    proc.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    proc.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    this.#proc = proc;
    this.#exited = false;
    children.add(proc);
    proc.once('exit', () => {
      children.delete(proc);
      this.#exited = true;
    });
    const deadline = Date.now() + 10_000;
    while ((await this.cli('PING').catch(() => '')) !== 'PONG') {
      if (this.#exited) throw new Error(`redis-server on ${this.port} exited: ${output.trim()}`);
      if (Date.now() > deadline) throw new Error(`redis-server on ${this.port} did not answer within 10 s: ${output.trim()}`);
      await sleep(20);
    }
  }

  /** One command through redis-cli; its reply as redis-cli prints it (trimmed). */
  cli(...args: string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(CLI_BIN, ['-h', '127.0.0.1', '-p', String(this.port), ...args], { timeout: 10_000 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`redis-cli -p ${this.port} ${args.join(' ')}: ${stderr || err.message}`));
        else resolve(stdout.trim());
      });
    });
  }

  /** SIGKILL: dies without a word, as in a crash. */
  async kill(): Promise<void> {
    const proc = this.#proc;
    if (proc === undefined || this.#exited) return;
    proc.kill('SIGCONT');
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGKILL');
    await exited;
  }

  /** SIGSTOP: its sockets stay open, nothing answers (waits until the kernel shows it stopped). */
  async freeze(): Promise<void> {
    const pid = this.#proc?.pid;
    if (pid === undefined || this.#exited) throw new Error(`redis-server on ${this.port} is not running`);
    this.#proc!.kill('SIGSTOP');
    const deadline = Date.now() + 5_000;
    while (!/^[Tt]$/.test(processState(pid))) {
      if (Date.now() > deadline) throw new Error(`redis-server on ${this.port} did not stop`);
      await sleep(5);
    }
  }

  thaw(): void {
    this.#proc?.kill('SIGCONT');
  }
}

function processState(pid: number): string {
  try {
    const stat = spawnSync('cat', [`/proc/${pid}/stat`], { encoding: 'utf8' }).stdout;
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return '';
  }
}

async function until(what: string, ms: number, ok: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/**
 * A primary and one replica (REPLICAOF), both without persistence. The replica reaches the primary
 * through `link`, a TcpProxy: SIGSTOP alone does not lose what the primary sent (the kernel buffers
 * it and the resumed replica reads it), a blackhole on the link does, as a network cut does.
 */
export class ReplicatedRedis {
  private constructor(
    readonly primary: RedisNode,
    readonly replica: RedisNode,
    readonly link: TcpProxy,
    private readonly dir: string,
  ) {}

  /** `primaryArgs`: more redis-server arguments for the primary (e.g. a `--rename-command`). */
  static async start(options: { primaryArgs?: readonly string[] } = {}): Promise<ReplicatedRedis> {
    const dir = mkdtempSync(join(tmpdir(), 'cos-redis-repl-'));
    const [p, r] = await freePorts(2, false);
    const primary = new RedisNode(p!, options.primaryArgs ?? [], dir);
    const link = await new TcpProxy('127.0.0.1', p!).listen();
    const replica = new RedisNode(r!, ['--replicaof', '127.0.0.1', String(link.port)], dir);
    const pair = new ReplicatedRedis(primary, replica, link, dir);
    try {
      await primary.start();
      await replica.start();
      await until('the replica to be in sync', 10_000, async () => /master_link_status:up/.test(await replica.cli('INFO', 'replication')));
    } catch (err) {
      await pair.stop();
      throw err;
    }
    return pair;
  }

  /** The replica stops (SIGSTOP) and what the primary sends it from now on is lost. */
  async stopReplica(): Promise<void> {
    this.link.blackhole();
    await this.replica.freeze();
  }

  /** REPLICAOF NO ONE on the replica: it serves writes with what it had received. */
  async promoteReplica(): Promise<void> {
    await this.replica.cli('REPLICAOF', 'NO', 'ONE');
  }

  async stop(): Promise<void> {
    await Promise.all([this.primary.kill(), this.replica.kill()]);
    await this.link.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

interface ClusterNodeInfo {
  readonly id: string;
  readonly port: number;
  readonly primary: boolean;
  /** A replica's primary's id. */
  readonly primaryId: string | null;
  readonly slots: readonly (readonly [number, number])[];
}

/** A Redis Cluster of three primaries, each with one replica, on loopback ports. */
export class RedisCluster {
  private constructor(
    readonly nodes: readonly RedisNode[],
    private readonly dir: string,
  ) {}

  /** Starts one; a port taken meanwhile by another test run (a parallel CI run) gets new ports, twice at most. */
  static async start(): Promise<RedisCluster> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await RedisCluster.#startOnce();
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
  }

  static async #startOnce(): Promise<RedisCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'cos-redis-cluster-'));
    const ports = await freePorts(6, true);
    const nodes = ports.map(
      (port) =>
        new RedisNode(
          port,
          ['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '1000', '--cluster-replica-validity-factor', '0'],
          dir,
        ),
    );
    const cluster = new RedisCluster(nodes, dir);
    try {
      await Promise.all(nodes.map((n) => n.start()));
      await new Promise<void>((resolve, reject) => {
        execFile(
          CLI_BIN,
          ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'],
          { timeout: 30_000 },
          (err, stdout, stderr) => (err ? reject(new Error(`redis-cli --cluster create: ${stderr || stdout || err.message}`)) : resolve()),
        );
      });
      await cluster.waitHealthy();
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  /** The seed URLs (REDIS_CLUSTER_NODES): every node. */
  get urls(): string[] {
    return this.nodes.map((n) => n.url);
  }

  node(port: number): RedisNode {
    const found = this.nodes.find((n) => n.port === port);
    if (found === undefined) throw new Error(`no node on ${port}`);
    return found;
  }

  /** Every running node answers cluster_state:ok and agrees on three primaries covering every slot. */
  async waitHealthy(ms = 20_000): Promise<void> {
    await until('the cluster to be healthy', ms, async () => {
      for (const n of this.nodes.filter((x) => x.running)) {
        if (!/cluster_state:ok/.test(await n.cli('CLUSTER', 'INFO'))) return false;
      }
      const replicasSynced = await Promise.all(
        this.nodes.filter((x) => x.running).map(async (n) => {
          const info = await n.cli('INFO', 'replication');
          return /role:master/.test(info) || /master_link_status:up/.test(info);
        }),
      );
      return replicasSynced.every(Boolean);
    });
  }

  /** CLUSTER NODES as seen from a running node. */
  async topology(): Promise<ClusterNodeInfo[]> {
    const from = this.nodes.find((n) => n.running);
    if (from === undefined) throw new Error('no node running');
    const text = await from.cli('CLUSTER', 'NODES');
    return text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((line) => {
        const [id, address, flags, primaryId, , , , , ...slots] = line.split(' ');
        return {
          id: id!,
          port: Number(address!.split('@')[0]!.split(':')[1]),
          primary: flags!.split(',').includes('master') && !flags!.split(',').includes('fail'),
          primaryId: primaryId === '-' ? null : primaryId!,
          slots: slots
            .filter((s) => !s.startsWith('['))
            .map((s) => {
              const [a, b] = s.split('-').map(Number);
              return [a!, b ?? a!] as const;
            }),
        };
      });
  }

  /** The primary serving `slot` now, and its replica. */
  async shardOf(slot: number): Promise<{ primary: RedisNode; primaryId: string; replica: RedisNode; firstSlot: number }> {
    const nodes = await this.topology();
    const p = nodes.find((n) => n.primary && n.slots.some(([a, b]) => slot >= a && slot <= b));
    if (p === undefined) throw new Error(`no primary serves slot ${slot}`);
    const r = nodes.find((n) => n.primaryId === p.id);
    if (r === undefined) throw new Error(`the primary of slot ${slot} has no replica`);
    return { primary: this.node(p.port), primaryId: p.id, replica: this.node(r.port), firstSlot: Math.min(...p.slots.map(([a]) => a)) };
  }

  /** The primaries' ids and their lowest slots. */
  async primaries(): Promise<{ id: string; port: number; firstSlot: number; lowest(n: number): Set<number> }[]> {
    return (await this.topology())
      .filter((n) => n.primary && n.slots.length > 0)
      .map((n) => {
        const ranges = [...n.slots].sort(([a], [b]) => a - b);
        return {
          id: n.id,
          port: n.port,
          firstSlot: ranges[0]![0],
          /** The `count` lowest slots it serves: those `reshard` moves first. */
          lowest(count: number): Set<number> {
            const out = new Set<number>();
            for (const [a, b] of ranges) for (let s = a; s <= b && out.size < count; s++) out.add(s);
            return out;
          },
        };
      });
  }

  /**
   * `redis-cli --cluster reshard`: moves `slots` slots (redis-cli takes the source's lowest ones)
   * from one primary to another, keys included, while clients keep running.
   */
  reshard(fromId: string, toId: string, slots: number): Promise<string> {
    const via = this.nodes.find((n) => n.running)!;
    return new Promise((resolve, reject) => {
      execFile(
        CLI_BIN,
        ['--cluster', 'reshard', `127.0.0.1:${via.port}`, '--cluster-from', fromId, '--cluster-to', toId, '--cluster-slots', String(slots), '--cluster-yes', '--cluster-pipeline', '10'],
        { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
        (err, stdout, stderr) => (err ? reject(new Error(`redis-cli --cluster reshard: ${stderr || err.message}`)) : resolve(stdout)),
      );
    });
  }

  /**
   * Cuts a replica's replication link while it stays alive in the cluster: the replica is given a
   * wrong `masterauth` (so it cannot reconnect) and the primary drops its replica connections
   * (`CLIENT KILL TYPE replica`). Resolves once the primary's ROLE lists no replica and the
   * replica reports its link down: from then on the primary's writes never reach it, and the
   * cluster can still promote it (with the data it had) when the primary fails.
   */
  async cutReplicaLink(shard: { primary: RedisNode; replica: RedisNode }): Promise<void> {
    await shard.replica.cli('CONFIG', 'SET', 'masterauth', 'a-wrong-password-cuts-the-link');
    await shard.primary.cli('CLIENT', 'KILL', 'TYPE', 'replica');
    await until('the primary to list no replica', 10_000, async () => (await shard.primary.cli('ROLE')).split('\n').length <= 3);
    await until('the replica to report its link down', 10_000, async () => /master_link_status:down/.test(await shard.replica.cli('INFO', 'replication')));
  }

  /** Freezes a primary (SIGSTOP: its sockets stay open, nothing answers); thaw it with `node.thaw()`. */
  async freezePrimary(shard: { primary: RedisNode }): Promise<void> {
    await shard.primary.freeze();
  }

  /**
   * Waits until `replica` serves as a primary (the cluster's own failover promoted it, or a
   * `CLUSTER FAILOVER`); resolves with the time (performance.now()) it was first seen so.
   */
  async waitPromoted(replica: RedisNode, ms = 20_000): Promise<number> {
    await until(`the replica on ${replica.port} to be promoted`, ms, async () => (await replica.cli('ROLE')).startsWith('master'));
    return performance.now();
  }

  /** Runs a command on every running primary (FLUSHALL, SCRIPT FLUSH). */
  async onPrimaries(...args: string[]): Promise<void> {
    const primaries = (await this.topology()).filter((n) => n.primary);
    await Promise.all(primaries.map((p) => this.node(p.port).cli(...args)));
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.kill()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
