/**
 * A fresh Postgres schema per suite (dropped afterwards), and the URL that reaches the same
 * database through a TcpProxy the test owns.
 */
import { createSqlStore } from '@cos/store-sql';
import { randomBytes } from 'node:crypto';
import { TcpProxy } from '@cos/test-support/tcp-proxy';

export function freshSchemaName(prefix: string): string {
  return `st_${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

/** Creates the schema; returns a function that drops it. */
export async function createSchema(databaseUrl: string, schema: string): Promise<() => Promise<void>> {
  const admin = createSqlStore({ databaseUrl, statementTimeoutMs: 30_000 });
  try {
    await admin.knex.raw('CREATE SCHEMA ??', [schema]);
  } finally {
    await admin.close();
  }
  return async () => {
    const dropper = createSqlStore({ databaseUrl, statementTimeoutMs: 30_000 });
    try {
      await dropper.knex.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
    } finally {
      await dropper.close();
    }
  };
}

/** A proxy in front of the database of `databaseUrl`, and the URL that goes through it. */
export async function proxiedDatabase(databaseUrl: string): Promise<{ proxy: TcpProxy; url: string }> {
  const proxy = await TcpProxy.for(databaseUrl, 5432);
  return { proxy, url: proxy.urlFor(databaseUrl) };
}
