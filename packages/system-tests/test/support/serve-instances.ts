/**
 * Real `cos-admin serve` processes side by side, as an operator runs several instances of the
 * service: a scratch Postgres database (migrated), a Redis of the suite's own that a test may kill,
 * freeze or flush (a redis-server, or a local Redis Cluster of three primaries and three replicas),
 * the working directory of the operator's commands, and n instances started together, each reaching
 * Postgres and Redis directly or through a TcpProxy the test owns (a Postgres proxy's statement
 * watcher shows what that instance reads: support/store-reads.ts).
 *
 * One close() stops and removes all of it, whatever failed first; a start that fails removes what it
 * had made before it throws. A suite calls startServeInstances in its `before` (or `beforeEach`) and
 * close() in the matching `after`, which mocha runs whether the tests passed or not.
 */
import { RedisCluster, redisTopologyAvailable } from '@cos/test-support/redis-cluster';
import { RedisServer, redisServerAvailable } from '@cos/test-support/redis-server';
import { TcpProxy } from '@cos/test-support/tcp-proxy';
import { cliJson, ensureBuilt, startServe, type Env, type ServeProcess } from '../../../cli/test/support/cli.js';
import { postgresDatabase, type TestDatabase } from '../../../cli/test/support/databases.js';
import { IN_CI, postgresUrl } from './env.js';
import { freePort, sleep } from './free-port.js';
import { Client } from './http.js';
import { proxiedDatabase } from './postgres.js';

/** Polls `ok` every 50 ms until it is true; past `timeoutMs` it fails, naming `what`. */
export async function until(ok: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await ok())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** What the instances share, ready before they start. */
export interface Ground {
  /** The working directory of the instances and of the operator's commands (removed by close()). */
  readonly dir: string;
  readonly databaseUrl: string;
  /** The shared environment: DATABASE_URL, REDIS_URL or REDIS_CLUSTER_NODES (every node), PORT=0, LOG_LEVEL=warn, WEBHOOK_POLL_INTERVAL_MS=3600000, then the suite's own. */
  readonly env: Env;
  /** The redis-server (a suite started with `redis: 'server'`). */
  readonly redis: RedisServer;
  /** The Redis Cluster (a suite started with `redis: 'cluster'`). */
  readonly cluster: RedisCluster;
  /** `cos-admin <args> --json` run in this process in `dir`, with the shared environment or `env`; its parsed output. */
  cli<T = any>(args: readonly string[], env?: Env): Promise<T>;
  /** `cos-admin org create` and `key issue` (label "owner"): the organisation's id and its raw key. */
  organisation(name: string, slug: string): Promise<{ id: string; key: string }>;
}

export interface InstanceOptions {
  /** Reach Postgres through a TcpProxy of the test's (the instance's `pgProxy`). */
  readonly postgresProxy?: boolean;
  /** Reach the redis-server through a TcpProxy of the test's (the instance's `redisProxy`), which it may cut, blackhole or trap. */
  readonly redisProxy?: boolean;
  /** This instance's variables over the shared ones: REDIS_CLUSTER_NODES naming some seeds only, CREDENTIAL_CACHE=off, REDIS_TIMEOUT_MS… */
  readonly env?: Env | ((ground: Ground) => Env);
}

export interface ServeInstancesOptions {
  readonly redis: 'server' | 'cluster';
  /** The suite's variables, shared by every instance and command; a function is given the working directory (for files made there). */
  readonly env?: Env | ((dir: string) => Env);
  /** Runs after `cos-admin migrate`, before the instances start: the organisations and keys the suite needs. */
  readonly seed?: (ground: Ground) => Promise<void>;
  /** One entry per instance, started together. */
  readonly instances: readonly InstanceOptions[];
}

export interface ServeInstance {
  readonly client: Client;
  readonly port: number;
  readonly serve: ServeProcess;
  /** The proxy in front of Postgres (an instance started with `postgresProxy`). */
  readonly pgProxy: TcpProxy;
  /** The proxy in front of the redis-server (an instance started with `redisProxy`). */
  readonly redisProxy: TcpProxy;
}

export interface ServeInstances extends Ground {
  readonly instances: readonly ServeInstance[];
  /**
   * Makes `firstCalls`, then waits out Redis's change bound. A Redis answers "not settled" for an
   * organisation new to it (or for all, when it is fresh) for that long from the first call on, and
   * nothing is cached meanwhile: after this, what the calls read may be cached.
   */
  settle(firstCalls: () => Promise<void>): Promise<void>;
  /** Stops the instances, the proxies and Redis, drops the database and removes the directory; every step is tried, the first failure thrown after. */
  close(): Promise<void>;
}

/** Redis's change bound (10 s) and a margin. */
const SETTLE_MS = 10_500;

/** A start that hangs fails after this; a serve that exits fails the start at once (a healthy start has taken more than 15 s on a loaded machine). */
const READY_BOUND_MS = 90_000;

/** Undo steps, run last first; each is tried whatever the others did, the first failure thrown after. */
class Teardown {
  private readonly steps: (() => unknown)[] = [];

  add(step: () => unknown): void {
    this.steps.push(step);
  }

  async run(): Promise<void> {
    const failures: unknown[] = [];
    for (const step of this.steps.splice(0).reverse()) {
      try {
        await step();
      } catch (e) {
        failures.push(e);
      }
    }
    if (failures.length > 0) throw failures[0];
  }
}

function missing(what: string, option: string): never {
  throw new Error(`this suite's instances have no ${what}: start them with ${option}`);
}

class Instances implements ServeInstances {
  readonly instances: ServeInstance[] = [];
  readonly env: Env;

  constructor(
    private readonly db: TestDatabase,
    private readonly redisOrCluster: RedisServer | RedisCluster,
    suiteEnv: ServeInstancesOptions['env'],
    private readonly teardown: Teardown,
  ) {
    this.env = {
      DATABASE_URL: db.databaseUrl,
      ...(redisOrCluster instanceof RedisCluster ? { REDIS_CLUSTER_NODES: redisOrCluster.urls.join(',') } : { REDIS_URL: redisOrCluster.url }),
      PORT: '0',
      LOG_LEVEL: 'warn',
      // The webhook outbox poll (a short transaction every WEBHOOK_POLL_INTERVAL_MS) is the one thing a
      // serve sends Postgres on its own; nothing here delivers webhooks, so it is slowed down to keep
      // the statements a proxy sees while requests are served to those requests alone.
      WEBHOOK_POLL_INTERVAL_MS: '3600000',
      ...(typeof suiteEnv === 'function' ? suiteEnv(db.cwd) : suiteEnv),
    };
  }

  get dir(): string {
    return this.db.cwd;
  }

  get databaseUrl(): string {
    return this.db.databaseUrl;
  }

  get redis(): RedisServer {
    return this.redisOrCluster instanceof RedisServer ? this.redisOrCluster : missing('redis-server', "redis: 'server'");
  }

  get cluster(): RedisCluster {
    return this.redisOrCluster instanceof RedisCluster ? this.redisOrCluster : missing('Redis Cluster', "redis: 'cluster'");
  }

  cli<T = any>(args: readonly string[], env: Env = this.env): Promise<T> {
    return cliJson<T>(args, env, this.db.cwd);
  }

  async organisation(name: string, slug: string): Promise<{ id: string; key: string }> {
    const { id } = await this.cli<{ id: string }>(['org', 'create', '--name', name, '--slug', slug]);
    return { id, key: (await this.cli<{ key: string }>(['key', 'issue', id, '--label', 'owner'])).key };
  }

  /** Starts one instance (its proxies first); what it started is undone by close(). */
  async start(options: InstanceOptions): Promise<ServeInstance> {
    const [pg, redisProxy, port] = await Promise.all([
      options.postgresProxy === true ? proxiedDatabase(this.databaseUrl) : undefined,
      options.redisProxy === true ? TcpProxy.for(this.redis.url, 6379) : undefined,
      freePort(),
    ]);
    if (pg !== undefined) this.teardown.add(() => pg.proxy.close());
    if (redisProxy !== undefined) this.teardown.add(() => redisProxy.close());
    const serve = startServe(
      [],
      {
        ...this.env,
        PORT: String(port),
        ...(pg !== undefined ? { DATABASE_URL: pg.url } : {}),
        ...(redisProxy !== undefined ? { REDIS_URL: redisProxy.urlFor(this.redis.url) } : {}),
        ...(typeof options.env === 'function' ? options.env(this) : options.env),
      },
      this.dir,
    );
    this.teardown.add(() => {
      serve.kill();
      return serve.exited();
    });
    return {
      client: new Client(`http://127.0.0.1:${port}`),
      port,
      serve,
      get pgProxy() {
        return pg?.proxy ?? missing('Postgres proxy', 'postgresProxy: true');
      },
      get redisProxy() {
        return redisProxy ?? missing('Redis proxy', 'redisProxy: true');
      },
    };
  }

  async settle(firstCalls: () => Promise<void>): Promise<void> {
    await firstCalls();
    await sleep(SETTLE_MS);
  }

  close(): Promise<void> {
    return this.teardown.run();
  }
}

/** Ready once /v1/health answers 200 (LOG_LEVEL=warn keeps the start-up line quiet); a serve that exits fails the wait at once. */
function ready(instance: ServeInstance): Promise<void> {
  const { child } = instance.serve;
  return until(
    async () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`serve exited before answering:\n${instance.serve.stderr()}`);
      return (await instance.client.call('GET', '/v1/health').catch(() => null))?.status === 200;
    },
    READY_BOUND_MS,
    'serve to answer',
  );
}

/**
 * Starts Redis and the database (together, while the CLI is built), migrates, seeds, then starts
 * every instance at once and waits until all answer. Skips the suite (ctx.skip()) where Postgres or
 * the Redis binaries are missing outside CI; under CI=true a missing one fails.
 */
export async function startServeInstances(ctx: Mocha.Context, options: ServeInstancesOptions): Promise<ServeInstances> {
  const clustered = options.redis === 'cluster';
  if (postgresUrl() === undefined || (!IN_CI && !(clustered ? redisTopologyAvailable() : redisServerAvailable()))) ctx.skip();
  const teardown = new Teardown();
  try {
    const [built, redis, db] = await Promise.allSettled([ensureBuilt(), clustered ? RedisCluster.start() : RedisServer.start(), postgresDatabase()]);
    if (redis.status === 'fulfilled') teardown.add(() => (redis.value instanceof RedisCluster ? redis.value.stop() : redis.value.kill()));
    if (db.status === 'fulfilled') teardown.add(() => db.value.drop());
    for (const s of [built, redis, db]) if (s.status === 'rejected') throw s.reason;
    const fx = new Instances((db as PromiseFulfilledResult<TestDatabase>).value, (redis as PromiseFulfilledResult<RedisServer | RedisCluster>).value, options.env, teardown);
    await fx.cli(['migrate']);
    await options.seed?.(fx);
    fx.instances.push(...(await Promise.all(options.instances.map((o) => fx.start(o)))));
    await Promise.all(fx.instances.map(ready));
    return fx;
  } catch (e) {
    await teardown.run().catch(() => undefined);
    throw e;
  }
}
