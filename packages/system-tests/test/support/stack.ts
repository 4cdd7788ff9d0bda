/**
 * A live service for a test: createSqlStore + createCore + createKoaApp behind a real http server
 * on port 0, with a CapturingLogger so tests can read every log line. Fixtures (organisations and
 * keys) are made through the core as the operator, exactly as `cos-admin` would.
 */
import type { Server } from 'node:http';
import { createCore, InProcessRateCounter, OPERATOR, type Core, type CoreConfig, type RateCounter } from '@cos/core';
import { CapturingLogger } from '@cos/core/testing';
import { createSqlStore } from '@cos/store-sql';
import { createClientErrorResponder, createConnectResponder, createKoaApp, type SecretScanningOptions } from '@cos/adapter-koa';
import { listen as cliListen } from '@cos/cli';
import { Client } from './http.js';

export type { SqlStore } from '@cos/store-sql';
type SqlStore = ReturnType<typeof createSqlStore>;
export type Knex = SqlStore['knex'];

export const SERVICE_VERSION = '0.1.0-system-tests';

export interface StackOptions {
  /** Default sqlite::memory:. */
  readonly databaseUrl?: string;
  readonly statementTimeoutMs?: number;
  /** Postgres: the schema to work in. */
  readonly schema?: string;
  /** Default: a fresh in-process counter. */
  readonly counter?: RateCounter;
  readonly config?: Partial<CoreConfig>;
  /** Run migrations first (default true). */
  readonly migrate?: boolean;
  /** The secret-scanning alert route (off by default, as in `serve` without scanner keys). */
  readonly secretScanning?: SecretScanningOptions;
}

export interface Stack {
  readonly baseUrl: string;
  readonly client: Client;
  readonly core: Core;
  readonly store: SqlStore;
  readonly logger: CapturingLogger;
  readonly server: Server;
  close(): Promise<void>;
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const logger = new CapturingLogger();
  const store = createSqlStore({
    databaseUrl: options.databaseUrl ?? 'sqlite::memory:',
    ...(options.schema !== undefined ? { schema: options.schema } : {}),
    ...(options.statementTimeoutMs !== undefined ? { statementTimeoutMs: options.statementTimeoutMs } : {}),
  });
  if (options.migrate !== false) await store.migrate();
  const core = createCore({
    stores: store.stores,
    unitOfWork: store.unitOfWork,
    health: store.health,
    counter: options.counter ?? new InProcessRateCounter(),
    logger,
    config: options.config ?? {},
  });
  // The app as `cos-admin serve` builds it (compose.ts): the Koa app with the parser-error answer.
  const app = Object.assign(createKoaApp({ core, logger }, { serviceVersion: SERVICE_VERSION, ...(options.secretScanning !== undefined ? { secretScanning: options.secretScanning } : {}) }), {
    clientError: createClientErrorResponder({ core, logger }),
    connect: createConnectResponder({ core, logger }),
  });
  // The cli's listener, as `cos-admin serve` runs it (its clientError handling included).
  const running = await cliListen(app, '127.0.0.1', 0, logger);
  const { server } = running;
  const baseUrl = running.url;
  return {
    baseUrl,
    client: new Client(baseUrl),
    core,
    store,
    logger,
    server,
    async close() {
      await running.stop(1000);
      await store.close();
      // mocha keeps every suite's closures alive until the run ends: drop what they hold.
      logger.entries.length = 0;
    },
  };
}

export interface Tenant {
  readonly id: string;
  readonly slug: string;
  /** A raw key of this organisation (standard, or platform for the system organisation). */
  readonly key: string;
  readonly keyId: string;
}

let slugCounter = 0;
/** A slug unique within this process. */
export function uniqueSlug(prefix: string): string {
  slugCounter += 1;
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${slugCounter}`.slice(0, 63).replace(/-+$/, '');
}

/** Creates an organisation and one key for it, as the operator. */
export async function createTenant(core: Core, prefix: string, options: { system?: boolean } = {}): Promise<Tenant> {
  const slug = uniqueSlug(prefix);
  const org = await core.organisations.create(OPERATOR, { name: `${prefix} organisation`, slug }, { isSystem: options.system === true });
  const issued = await core.apiKeys.issue(OPERATOR, org.id, { label: `${prefix} key` });
  return { id: org.id, slug, key: issued.rawKey, keyId: issued.key.id };
}

/** A well-formed key that was never issued. */
export function wellFormedUnknownKey(seed = Math.random()): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let x = Math.floor(seed * 2 ** 31) || 1;
  let out = 'svc_live_';
  while (out.length < 57) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    out += alphabet[x % alphabet.length];
  }
  return out;
}
