/**
 * DATABASE_URL parsing (contract "Operator interface"): `sqlite:<path>`, `sqlite::memory:` or
 * `postgres://…` / `postgresql://…` (read by pg-connection-string, pg's own parser). Error messages
 * name the problem but never echo a password.
 */
import { parse, type ConnectionOptions } from 'pg-connection-string';

export type SqlDialect = 'sqlite' | 'postgres';

export type ParsedDatabaseUrl =
  | { readonly dialect: 'sqlite'; readonly filename: string; readonly memory: boolean }
  | { readonly dialect: 'postgres'; readonly connectionString: string };

const MEMORY = ':memory:';

/** The URL with any password replaced, safe to put in an error message or a log line. */
export function redactDatabaseUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@?#]*):[^@/?#]*@/i, '$1:***@');
}

export function parseDatabaseUrl(url: string): ParsedDatabaseUrl {
  if (typeof url !== 'string' || url.trim() === '') {
    throw new Error('DATABASE_URL is empty; expected sqlite:<path>, sqlite::memory: or postgres://user@host:port/database');
  }
  const value = url.trim();
  const lower = value.toLowerCase();

  if (lower.startsWith('sqlite:')) {
    let rest = value.slice('sqlite:'.length);
    if (rest.startsWith('//')) rest = rest.slice(2); // sqlite:///abs/path, sqlite://./relative
    if (rest === MEMORY) return { dialect: 'sqlite', filename: MEMORY, memory: true };
    if (rest === '') {
      throw new Error('DATABASE_URL "sqlite:" names no database file; expected sqlite:<path> (e.g. sqlite:./data/cos.sqlite) or sqlite::memory:');
    }
    if (rest.includes('\0')) throw new Error('DATABASE_URL contains a NUL character in the SQLite file path');
    return { dialect: 'sqlite', filename: rest, memory: false };
  }

  if (lower.startsWith('postgres://') || lower.startsWith('postgresql://')) {
    // pg's own parser: what is checked here is what pg will connect to.
    let parsed: ConnectionOptions;
    try {
      parsed = parse(value);
    } catch {
      throw new Error(`DATABASE_URL "${redactDatabaseUrl(value)}" is not a valid postgres:// URL`);
    }
    if (!parsed.database || parsed.database.includes('/')) {
      throw new Error(`DATABASE_URL "${redactDatabaseUrl(value)}" names no database; expected postgres://user@host:port/database`);
    }
    if (!parsed.host) {
      throw new Error(`DATABASE_URL "${redactDatabaseUrl(value)}" names no host; expected postgres://user@host:port/database`);
    }
    return { dialect: 'postgres', connectionString: value };
  }

  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(value)?.[1];
  throw new Error(
    scheme === undefined
      ? 'DATABASE_URL has no scheme; expected sqlite:<path>, sqlite::memory: or postgres://user@host:port/database'
      : `DATABASE_URL scheme "${scheme}:" is not supported; expected sqlite:<path>, sqlite::memory: or postgres://user@host:port/database`,
  );
}
