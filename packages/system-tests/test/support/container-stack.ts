/**
 * The whole stack as `cos-admin serve` runs it: loadConfig -> buildContainer (inversify, the
 * store chosen by DATABASE_URL, the Redis limiter when REDIS_URL is set) -> the cli's listener.
 */
import type { Core, Logger } from '@cos/core';
import { buildContainer, closeContainer, coreOf, listen, loadConfig, storeOf, CLI_TOKENS, type HttpApp } from '@cos/cli';
import { Client } from './http.js';
import type { SqlStore } from './stack.js';

export interface ContainerStack {
  readonly baseUrl: string;
  readonly client: Client;
  readonly core: Core;
  readonly store: SqlStore;
  close(): Promise<void>;
}

/** `env` is the service's environment (DATABASE_URL, REDIS_URL, RATE_LIMIT_PER_MINUTE, ...). */
export async function startContainerStack(env: Record<string, string>, logger: Logger): Promise<ContainerStack> {
  const config = loadConfig({ ...env, PORT: '0' }, { envFile: false });
  const container = await buildContainer(config, { logger });
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
