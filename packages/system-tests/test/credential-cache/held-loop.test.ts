/**
 * The credential cache under a held event loop, end to end (C-150, C-151): a real `cos-admin serve`
 * on Postgres and Redis, both reached through TcpProxy instances the test owns, caches the keys of
 * two organisations. A burst of concurrent requests is sent; their freshness calls reach a frozen
 * Redis; the serve process is then stopped (SIGSTOP), Redis thawed, and the serve kept stopped past
 * REDIS_TIMEOUT_MS while every reply lands in its socket: the loop is held while the replies arrive.
 * Once it runs again, the replies that were waiting must be used: no credential or organisation read
 * may reach Postgres (the TcpProxy statement watcher), for the burst or after it, and every request is
 * counted (not failed open).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { expect } from 'chai';
import { FRESHNESS_SCRIPT_SHA1 } from '@cos/limiter-redis';
import { bytesWaitingFrom } from '@cos/test-support/held-loop';
import type { RedisServer } from '@cos/test-support/redis-server';
import type { TcpProxy } from '@cos/test-support/tcp-proxy';
import type { ServeProcess } from '../../../cli/test/support/cli.js';
import type { Client, Incoming } from '../support/http.js';
import { sleep } from '../support/free-port.js';
import { startServeInstances, type ServeInstances } from '../support/serve-instances.js';
import { storeReadsDuring } from '../support/store-reads.js';

async function until(ok: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await ok())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** The kernel's state letter of a process (/proc/<pid>/stat): 'T' once a SIGSTOP took effect. */
function processState(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return stat.slice(stat.lastIndexOf(')') + 2).charAt(0);
}

/** The process ids whose parent is `pid` (/proc/<n>/stat). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}

/**
 * The requests the complete freshness calls in `stream` (what the serve sent Redis, as RESP) stand
 * for: a call is `EVALSHA <check sha> 5 <5 keys> <6 arguments> [hits]`, one per organisation and
 * turn, and carries a seventh argument when it stands for more than one request.
 */
function requestsIn(stream: string): number {
  const call = new RegExp(`\\*(\\d+)\r\n\\$7\r\nEVALSHA\r\n\\$40\r\n${FRESHNESS_SCRIPT_SHA1.check}\r\n`, 'g');
  let requests = 0;
  for (let match = call.exec(stream); match !== null; match = call.exec(stream)) {
    const strings = Number(match[1]) - 2;
    let at = call.lastIndex;
    let last = '';
    for (let i = 0; i < strings; i++) {
      const header = /^\$(\d+)\r\n/.exec(stream.slice(at, at + 16));
      if (header === null) return requests;
      const start = at + header[0].length;
      last = stream.slice(start, start + Number(header[1]));
      at = start + Number(header[1]) + 2;
      if (at > stream.length) return requests;
    }
    requests += strings === 13 ? Number(last) : 1;
  }
  return requests;
}

/**
 * REDIS_TIMEOUT_MS of the serve under test: well above the time the test needs between the burst and
 * the stop on a loaded machine, so that no call is late before the worker is stopped (Redis is frozen
 * until then); the stop then outlasts it by a quarter.
 */
const TIMEOUT_MS = 4_000;
const BURST = 50;
const LIMIT = 100_000_000;

describe('system: the credential cache with the serve process held while its Redis replies arrive (C-150, C-151)', function () {
  this.timeout(120_000);
  let fx: ServeInstances;
  let redis: RedisServer;
  let redisProxy: TcpProxy;
  let pgProxy: TcpProxy;
  let serve: ServeProcess;
  let client: Client;
  const keys: string[] = [];
  const orgIds: string[] = [];

  before(async function () {
    fx = await startServeInstances(this, {
      redis: 'server',
      env: { RATE_LIMIT_PER_MINUTE: String(LIMIT) },
      async seed(ground) {
        for (const n of [1, 2]) {
          const { id, key } = await ground.organisation(`Held ${n}`, `held-${n}`);
          orgIds.push(id);
          keys.push(key);
        }
      },
      instances: [{ postgresProxy: true, redisProxy: true, env: { REDIS_TIMEOUT_MS: String(TIMEOUT_MS) } }],
    });
    ({ redis } = fx);
    ({ serve, client, pgProxy, redisProxy } = fx.instances[0]!);
  });

  after(async () => {
    // A worker the test left stopped would outlive its primary: it is let run again first.
    if (serve !== undefined) for (const pid of childrenOf(serve.child.pid!)) process.kill(pid, 'SIGCONT');
    redis?.thaw();
    await fx?.close();
  });

  const get = (n: number): Promise<Incoming> => client.call('GET', `/v1/organisations/${orgIds[n % 2]}`, { key: keys[n % 2]!, timeoutMs: 60_000 });
  const counted = (r: Incoming) => Number(r.headers.get('x-ratelimit-remaining')) < LIMIT;

  it('a burst whose freshness replies wait in the socket while the process is stopped past REDIS_TIMEOUT_MS is served from the cache: no credential read sent to Postgres, every request counted', async () => {
    // A fresh Redis answers "not settled" for its change bound (10 s): wait until both keys are
    // served from the cache (counted, no read sent to Postgres).
    await until(
      async () => {
        const seen = await storeReadsDuring(pgProxy, async () => {
          for (const n of [0, 1]) expect((await get(n)).status).to.equal(200);
        });
        return seen.length === 0;
      },
      30_000,
      'both keys to be served from the cache',
    );
    // `serve` is a primary and its worker (WORKERS=1): the worker serves and talks to Redis.
    const workers = childrenOf(serve.child.pid!);
    expect(workers, 'the serve primary\'s worker processes').to.have.length(1);
    const pid = workers[0]!;
    // Every chunk the worker sends Redis, in order (a call may be split across two chunks).
    const calls = redisProxy.watch(/[\s\S]/);
    const sent = () => requestsIn(calls.seen.join(''));
    let answers: Incoming[] = [];
    const reads = await storeReadsDuring(pgProxy, async () => {
      redis.freeze();
      const burst = Promise.all(Array.from({ length: BURST }, (_, n) => get(n)));
      try {
        await until(() => sent() >= BURST, 20_000, `the serve to send the freshness checks of ${BURST} requests`);
        process.kill(pid, 'SIGSTOP');
        await until(() => processState(pid) === 'T', 5_000, 'the worker to stop');
        const stoppedAt = performance.now();
        redis.thaw();
        // Every call went out before the stop, so every deadline has passed 1.25 × the bound later;
        // by then Redis answered them all (well within their deadlines) and the replies wait.
        await until(() => performance.now() - stoppedAt > 1.25 * TIMEOUT_MS && bytesWaitingFrom([redisProxy.port]), 20_000, 'the replies to wait in the stopped worker\'s socket');
      } finally {
        redis.thaw();
        process.kill(pid, 'SIGCONT');
        calls.stop();
      }
      answers = await burst;
      for (const n of [0, 1]) answers.push(await get(n));
    });
    expect(answers.map((r) => r.status)).to.deep.equal(Array(BURST + 2).fill(200));
    expect(reads.length, `credential and organisation reads sent to Postgres for ${BURST + 2} requests`).to.equal(0);
    expect(answers.filter((r) => !counted(r)).length, 'requests failed open (not counted)').to.equal(0);
  });
});
