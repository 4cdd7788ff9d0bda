/**
 * Example 3: run the whole stack (SQL store, rate limiter, core, Koa app) from the cli's
 * composition root, with one binding replaced: the clock, by one the host controls.
 *
 *   node --import tsx --conditions=source examples/03-build-container-override.ts
 */
import { pathToFileURL } from 'node:url';
import { buildContainer, closeContainer, CLI_TOKENS, listen, loadConfig, makeStoreReady, type RunningServer } from '@cos/cli';
import { OPERATOR, silentLogger, type Clock } from '@cos/core';

/** A clock the host controls (like FakeClock in @cos/core/testing): it stands still until moved. */
class HostClock implements Clock {
  private ms: number;
  constructor(start: string) {
    this.ms = Date.parse(start);
  }
  now(): Date {
    return new Date(this.ms);
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

export async function main() {
  // The configuration `cos-admin serve` reads from the environment, here given explicitly.
  const config = loadConfig({ DATABASE_URL: 'sqlite::memory:', PORT: '0', RATE_LIMIT_PER_MINUTE: '2', LOG_LEVEL: 'silent' });
  const clock = new HostClock('2026-06-10T09:00:30.000Z');
  // Nothing is built until it is resolved: a binding replaced now reaches everything built from it
  // (the store, the in-process counter, the core and the Koa app all get this clock). Any token of
  // CLI_TOKENS can be rebound so; `buildContainer(config, { clock })` does the same.
  const container = await buildContainer(config);
  container.rebind(CLI_TOKENS.Clock).toConstantValue(clock);
  container.rebind(CLI_TOKENS.Logger).toConstantValue(silentLogger);
  let server: RunningServer | undefined;
  try {
    await makeStoreReady(container.get(CLI_TOKENS.SqlStore)); // SQLite: applies the migrations
    const core = container.get(CLI_TOKENS.Core);
    const org = await core.organisations.create(OPERATOR, { name: 'Acme Ltd', slug: 'acme' });
    const { rawKey } = await core.apiKeys.issue(OPERATOR, org.id, {
      label: 'expires in an hour',
      expires_at: '2026-06-10T10:00:30.000Z',
    });

    // The Koa app is resolved asynchronously (Koa is loaded on first use); listen() adds graceful stop().
    server = await listen(await container.getAsync(CLI_TOKENS.HttpApp), config.host, config.port, silentLogger);
    const url = `${server.url}/v1/organisations/${org.id}`;
    const get = () => fetch(url, { headers: { authorization: `Bearer ${rawKey}` } });

    // Within one UTC minute of the host's clock: 2 requests allowed, the 3rd is 429.
    const statuses = [(await get()).status, (await get()).status];
    const limited = await get();
    const problem = (await limited.json()) as { retry_after: number };
    // The next minute starts a new window.
    clock.advance(30_000);
    const nextMinute = await get();
    // An hour later the key has expired.
    clock.advance(60 * 60_000);
    const afterExpiry = await get();

    return {
      createdAt: org.createdAt.toISOString(),
      statuses: [...statuses, limited.status, nextMinute.status, afterExpiry.status],
      retryAfter: problem.retry_after,
      resetOfFirstWindow: Number(limited.headers.get('x-ratelimit-reset')),
      remainingInNextMinute: Number(nextMinute.headers.get('x-ratelimit-remaining')),
    };
  } finally {
    await server?.stop();
    // Closes what was built, dependants first: the core's pending key uses, then the pool.
    await closeContainer(container);
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await main(), null, 2));
}
