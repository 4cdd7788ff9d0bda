/**
 * No cliff under load (C-150, C-151, C-200, C-203, C-204): a real `cos-admin serve` on Postgres
 * (through a TcpProxy the test owns) and Redis answers 200 concurrent keep-alive connections of two
 * cached keys, on whatever load this machine has. Its freshness calls are batched per organisation
 * and turn, and the requests of a call that is late anyway (Redis starved of CPU past
 * REDIS_TIMEOUT_MS) share one store read per key. The TcpProxy statement watcher counts the
 * credential and organisation reads: fewer than one per hundred requests. Within a window every count
 * is handed out once (C-201).
 */
import { Agent, request } from 'node:http';
import { expect } from 'chai';
import type { TcpProxy } from '@cos/test-support/tcp-proxy';
import { sleep } from '../support/free-port.js';
import { startServeInstances, type ServeInstances } from '../support/serve-instances.js';
import { storeReadsDuring } from '../support/store-reads.js';

const CONNECTIONS = 200;
const PER_CONNECTION = 25;
const LIMIT = 100_000_000;

interface Answer {
  readonly organisation: number;
  readonly status: number;
  readonly remaining: number;
  readonly reset: string;
}

describe('system: the credential cache at 200 connections (C-200, C-201, C-203, C-204)', function () {
  this.timeout(180_000);
  let fx: ServeInstances;
  let pgProxy: TcpProxy;
  let port: number;
  const keys: string[] = [];
  const orgIds: string[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });

  before(async function () {
    fx = await startServeInstances(this, {
      redis: 'server',
      env: { RATE_LIMIT_PER_MINUTE: String(LIMIT) },
      async seed(ground) {
        for (const n of [1, 2]) {
          const { id, key } = await ground.organisation(`Load ${n}`, `load-${n}`);
          orgIds.push(id);
          keys.push(key);
        }
      },
      instances: [{ postgresProxy: true }],
    });
    ({ port, pgProxy } = fx.instances[0]!);
  });

  after(async () => {
    agent.destroy();
    await fx?.close();
  });

  function get(n: number): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, path: `/v1/organisations/${orgIds[n % 2]}`, headers: { authorization: `Bearer ${keys[n % 2]}` }, agent, timeout: 60_000 },
        (res) => {
          res.resume();
          res.on('error', reject);
          res.on('end', () =>
            resolve({ organisation: n % 2, status: res.statusCode ?? 0, remaining: Number(res.headers['x-ratelimit-remaining']), reset: String(res.headers['x-ratelimit-reset']) }),
          );
        },
      );
      req.on('error', reject);
      req.on('timeout', () => req.destroy(new Error('request timed out')));
      req.end();
    });
  }

  it('200 concurrent connections: fewer than 0.01 credential reads sent to Postgres per request, and each count handed out once', async () => {
    // A fresh Redis answers "not settled" for its change bound (10 s): wait until both keys are served from the cache.
    const deadline = performance.now() + 30_000;
    for (;;) {
      const seen = await storeReadsDuring(pgProxy, async () => {
        for (const n of [0, 1]) expect((await get(n)).status).to.equal(200);
      });
      if (seen.length === 0) break;
      if (performance.now() > deadline) throw new Error('the keys were never served from the cache');
      await sleep(200);
    }
    const answers: Answer[] = [];
    const reads = await storeReadsDuring(pgProxy, async () => {
      await Promise.all(
        Array.from({ length: CONNECTIONS }, async (_, c) => {
          for (let i = 0; i < PER_CONNECTION; i++) answers.push(await get(c + i));
        }),
      );
    });
    const total = CONNECTIONS * PER_CONNECTION;
    const failedOpen = answers.filter((a) => a.remaining >= LIMIT).length;
    console.log(`      ${total} requests on ${CONNECTIONS} connections, ${reads.length} credential or organisation reads sent to Postgres, ${failedOpen} failed open`);
    expect(answers.filter((a) => a.status !== 200).length, 'answers other than 200').to.equal(0);
    expect(reads.length / total, `credential and organisation reads sent to Postgres for ${total} requests (${reads.length})`).to.be.below(0.01);
    // A call Redis did not answer within REDIS_TIMEOUT_MS fails its requests open (uncounted), as it
    // should; a loaded machine makes a few. Every counted request's count is handed out once per
    // organisation and window (C-201).
    const counts = new Map<string, number[]>();
    for (const a of answers) {
      if (a.remaining >= LIMIT) continue;
      const group = `${a.organisation} ${a.reset}`;
      const list = counts.get(group);
      if (list === undefined) counts.set(group, [a.remaining]);
      else list.push(a.remaining);
    }
    for (const [group, remaining] of counts) expect(new Set(remaining).size, `distinct counts of ${group}`).to.equal(remaining.length);
  });
});
