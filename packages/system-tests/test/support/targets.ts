/**
 * The stores a suite runs on: SQLite in memory always, Postgres (in a fresh schema, dropped after
 * the suite) when the run has one, and always under CI=true (env.ts: a missing URL fails loudly).
 */
import { postgresUrl } from './env.js';
import { createSchema, freshSchemaName } from './postgres.js';
import { startStack, type Stack, type StackOptions } from './stack.js';

export interface StoreTarget {
  readonly name: 'SQLite' | 'Postgres';
  /** The database URL, or undefined when this run has no such store (the suite skips). */
  url(): string | undefined;
}

export const STORE_TARGETS: readonly StoreTarget[] = [
  { name: 'SQLite', url: () => 'sqlite::memory:' },
  { name: 'Postgres', url: () => postgresUrl() },
];

/** A stack on `target` (Postgres: in a fresh schema), and how to close it; undefined when the store is absent. */
export async function startStackOn(
  target: StoreTarget,
  schemaPrefix: string,
  options: Omit<StackOptions, 'databaseUrl' | 'schema'> = {},
): Promise<{ stack: Stack; close(): Promise<void> } | undefined> {
  const url = target.url();
  if (url === undefined) return undefined;
  let dropSchema: (() => Promise<void>) | undefined;
  let schema: string | undefined;
  if (url.startsWith('postgres')) {
    schema = freshSchemaName(schemaPrefix);
    dropSchema = await createSchema(url, schema);
  }
  const stack = await startStack({ ...options, databaseUrl: url, ...(schema !== undefined ? { schema } : {}) });
  return {
    stack,
    async close() {
      await stack.close();
      await dropSchema?.();
    },
  };
}
