/**
 * The whole stack as `cos-admin serve` runs it: loadConfig -> buildContainer (inversify, the
 * store chosen by DATABASE_URL, the Redis limiter when REDIS_URL is set) -> the cli's listener.
 */
import type { Core, Logger } from '@cos/core';
import type { HttpApp } from '@cos/cli';
import { Client } from './http.js';
import type { SqlStore } from './stack.js';

export interface ContainerStack {
  readonly baseUrl: string;
  readonly client: Client;
  readonly core: Core;
  readonly store: SqlStore;
  close(): Promise<void>;
}

/**
 * `env` is the service's environment (DATABASE_URL, REDIS_URL, RATE_LIMIT_PER_MINUTE, ...);
 * `statementTimeoutMs` the store's answer budget (default the store's 2000 ms).
 *
 * @cos/cli is imported dynamically on purpose. Under mocha + tsx a test file and its static
 * imports are compiled to CommonJS and `require`d, while buildContainer loads @cos/adapter-koa
 * with a dynamic `import()`, i.e. in the ESM graph, which then gets its own copy of @cos/core:
 * `instanceof DomainError` fails across the two copies and every domain error renders as 500.
 * Importing the cli dynamically keeps the whole stack in one (ESM) graph, as in production.
 */
export async function startContainerStack(env: Record<string, string>, logger: Logger, options: { statementTimeoutMs?: number } = {}): Promise<ContainerStack> {
  const { buildContainer, closeContainer, coreOf, listen, loadConfig, storeOf, CLI_TOKENS } = await import('@cos/cli');
  const config = loadConfig({ ...env, PORT: '0' }, { envFile: false });
  const container = await buildContainer(config, { logger, ...options });
  try {
    const store = storeOf(container);
    await store.migrate();
    const app = await container.getAsync<HttpApp>(CLI_TOKENS.HttpApp);
    const running = await listen(app, '127.0.0.1', 0, logger);
    return {
      baseUrl: running.url,
      client: new Client(running.url),
      core: coreOf(container),
      store,
      async close() {
        await running.stop(2000);
        await closeContainer(container);
      },
    };
  } catch (e) {
    await closeContainer(container);
    throw e;
  }
}

/** DATABASE_URL for a Postgres schema: the search_path travels in the connection's startup options. */
export function postgresUrlForSchema(databaseUrl: string, schema: string): string {
  const url = new URL(databaseUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}
