/**
 * `cos-admin db copy --to URL`: the database DATABASE_URL names (the source) copied into another
 * (the target), SQLite and Postgres in either direction, then verified before exit 0: row counts per
 * table, every organisation's audit chain recomputed on the target with its head equal to the
 * source's, and the key rows (digests, lineage, scopes, state) of a sample of keys, or of every key
 * with `--verify all`, equal on both sides.
 */
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { Option, type Command } from 'commander';
import {
  checkCopyEnds,
  copyDatabase,
  CopyRefused,
  createSqlStore,
  parseDatabaseUrl,
  redactDatabaseUrl,
  tableCounts,
  type SqlStore,
  type TableProgress,
} from '@cos/store-sql';
import { digestsEqual } from '@cos/core';
import { verifyStore } from '../audit-integrity.js';
import { CliError } from '../errors.js';
import { currentIo, runPath } from '../io.js';
import { emit } from '../output.js';
import { runCommand } from '../runtime.js';
import { jsonWanted, plural, withJson } from './shared.js';

/** Keys compared row by row after a copy without `--verify all`. */
const KEY_SAMPLE = 1000;

interface CopyOptions {
  to: string;
  verify: 'sample' | 'all';
}

/** The identity of a database URL, to refuse copying a database onto itself. */
function databaseIdentity(url: string): string {
  const parsed = parseDatabaseUrl(url);
  if (parsed.dialect === 'sqlite') {
    if (parsed.memory) return 'sqlite::memory:';
    const path = resolve(parsed.filename);
    try {
      return `sqlite:${realpathSync(path)}`;
    } catch {
      return `sqlite:${path}`;
    }
  }
  const u = new URL(parsed.connectionString.replace(/^postgresql:/i, 'postgres:'));
  return `postgres://${u.hostname.toLowerCase()}:${u.port || '5432'}/${decodeURIComponent(u.pathname.slice(1))}`;
}

/** The target URL, checked: a database the service supports, not the source itself (both usage errors). */
function targetUrl(given: string, sourceUrl: string): string {
  let parsed;
  try {
    parsed = parseDatabaseUrl(given);
  } catch (err) {
    throw new CliError(`--to: ${(err as Error).message.replace(/^DATABASE_URL/, 'the URL')}`, { usage: true });
  }
  if (parsed.dialect === 'sqlite' && parsed.memory) throw new CliError('--to: an in-memory SQLite database ends with the command; name a file or a Postgres database', { usage: true });
  const url = parsed.dialect === 'sqlite' ? `sqlite:${runPath(parsed.filename)}` : given;
  if (databaseIdentity(url) === databaseIdentity(sourceUrl)) {
    throw new CliError('--to names the source database itself (DATABASE_URL); name another database', { usage: true });
  }
  return url;
}

/** Progress on stderr: one line rewritten in place on a terminal, a line per table otherwise. */
function progressReporter(): { onProgress: (p: TableProgress) => void; done: () => void } {
  const err = currentIo().stderr as NodeJS.WritableStream & { isTTY?: boolean };
  const tty = err.isTTY === true;
  // Each table's rate counts from the end of the one before it.
  let started = performance.now();
  return {
    onProgress(p) {
      const seconds = (performance.now() - started) / 1000;
      const rate = seconds > 0 ? Math.round(p.copied / seconds) : p.copied;
      const line = `${p.table}: ${p.copied.toLocaleString('en')} of ${p.total.toLocaleString('en')} rows (${rate.toLocaleString('en')} rows/s)`;
      if (tty) err.write(`\r\x1b[2K${line}`);
      else if (p.copied === p.total) err.write(`${line}\n`);
      if (tty && p.copied === p.total) err.write('\n');
      if (p.copied === p.total) started = performance.now();
    },
    done() {
      if (tty) err.write('\r\x1b[2K');
    },
  };
}

function normalised(row: Record<string, unknown> | undefined): Record<string, string | null> | undefined {
  if (row === undefined) return undefined;
  return Object.fromEntries(Object.entries(row).map(([k, v]) => [k, v === null || v === undefined ? null : String(v)]));
}

/** The first key whose row differs between source and target, or null. */
async function firstDifferingKey(source: SqlStore, target: SqlStore, all: boolean): Promise<string | null> {
  const ids = (await source.knex.raw(all ? 'SELECT id FROM api_keys ORDER BY id' : `SELECT id FROM api_keys ORDER BY random() LIMIT ${KEY_SAMPLE}`)) as unknown;
  const list = (Array.isArray(ids) ? ids : (ids as { rows: unknown[] }).rows) as Array<{ id: string }>;
  for (let i = 0; i < list.length; i += 500) {
    const chunk = list.slice(i, i + 500).map((r) => r.id);
    const [a, b] = await Promise.all([source.knex('api_keys').whereIn('id', chunk), target.knex('api_keys').whereIn('id', chunk)]);
    const there = new Map((b as Array<Record<string, unknown>>).map((r) => [String(r['id']), normalised(r)]));
    for (const row of a as Array<Record<string, unknown>>) {
      if (JSON.stringify(normalised(row)) !== JSON.stringify(there.get(String(row['id'])))) return String(row['id']);
    }
  }
  return null;
}

interface Verification {
  readonly counts: Array<{ table: string; source: number; target: number }>;
  readonly chains: number;
  readonly keys_compared: number | 'all';
}

async function verifyCopy(source: SqlStore, target: SqlStore, all: boolean): Promise<Verification> {
  const [from, to] = await Promise.all([tableCounts(source.knex), tableCounts(target.knex)]);
  const counts = [...from].map(([table, n]) => ({ table, source: n, target: to.get(table) ?? 0 }));
  const wrong = counts.find((c) => c.source !== c.target);
  // Rows written to the source after the snapshot make it larger than the copy: named, not hidden.
  if (wrong !== undefined) {
    throw new CliError(`verification failed: ${wrong.table} holds ${wrong.source} rows on the source and ${wrong.target} on the target (was the source written to during the copy?)`, { code: 'COPY_MISMATCH' });
  }
  const reports = await verifyStore(target.stores.audit);
  const broken = reports.find((r) => r.status !== 'ok');
  if (broken !== undefined) throw new CliError(`verification failed: the audit chain of organisation ${broken.organisation_id} does not hold on the target`, { code: 'COPY_MISMATCH' });
  const heads = new Map((await source.stores.audit.heads()).map((h) => [h.organisationId, h]));
  for (const h of await target.stores.audit.heads()) {
    const s = heads.get(h.organisationId);
    if (s === undefined || s.seq !== h.seq || !digestsEqual(s.hash, h.hash)) {
      throw new CliError(`verification failed: the audit head of organisation ${h.organisationId} differs from the source's`, { code: 'COPY_MISMATCH' });
    }
    heads.delete(h.organisationId);
  }
  const missing = heads.keys().next();
  if (missing.done !== true) throw new CliError(`verification failed: organisation ${missing.value} has no audit chain on the target`, { code: 'COPY_MISMATCH' });
  const differing = await firstDifferingKey(source, target, all);
  if (differing !== null) throw new CliError(`verification failed: api_keys row ${differing} differs between source and target`, { code: 'COPY_MISMATCH' });
  return { counts, chains: reports.length, keys_compared: all ? 'all' : Math.min(KEY_SAMPLE, from.get('api_keys') ?? 0) };
}

export function registerDb(program: Command): void {
  const db = program.command('db').description('whole-database operations');
  withJson(
    db
      .command('copy')
      .description('copy the database DATABASE_URL names into an empty database (SQLite or Postgres, either way), then verify the copy')
      .requiredOption('--to <url>', 'the target: sqlite:<path> or postgres://user@host:port/database; must be empty or freshly migrated')
      .addOption(new Option('--verify <what>', 'key rows compared after the copy: a sample of 1000, or all').choices(['sample', 'all']).default('sample'))
      .action(async (opts: CopyOptions, cmd: Command) => {
        await runCommand(
          jsonWanted(cmd),
          async ({ config, store: source, json }) => {
            const url = targetUrl(opts.to, config.databaseUrl);
            const target = createSqlStore({ databaseUrl: url, poolMax: 2 });
            try {
              try {
                await target.query('SELECT 1');
              } catch (err) {
                throw new CliError(`cannot reach the target database ${redactDatabaseUrl(url)}: ${(err as Error).message}`, { code: 'TARGET_UNREACHABLE' });
              }
              try {
                await checkCopyEnds(source, target);
              } catch (err) {
                if (err instanceof CopyRefused) throw new CliError(`${err.message}; nothing was written`, { code: 'COPY_REFUSED' });
                throw err;
              }
              const progress = json ? undefined : progressReporter();
              const started = performance.now();
              let result;
              try {
                result = await copyDatabase(source, target, progress !== undefined ? { onProgress: progress.onProgress } : {});
              } catch (err) {
                progress?.done();
                throw new CliError(`the copy failed and was rolled back: the target holds no row (${(err as Error).message})`, { code: 'COPY_FAILED' });
              }
              const seconds = (performance.now() - started) / 1000;
              const verification = await verifyCopy(source, target, opts.verify === 'all');
              const rows = result.tables.reduce((n, t) => n + t.rows, 0);
              emit(
                json,
                { source: source.dialect, target: target.dialect, migrated: result.migrated, tables: result.tables, rows, seconds: Number(seconds.toFixed(3)), verification },
                () =>
                  [
                    `Copied ${plural(rows, 'row')} from the ${source.dialect} database into the ${target.dialect} database ${redactDatabaseUrl(url)} in ${seconds.toFixed(1)} s:`,
                    ...result.tables.map((t) => `  ${t.table.padEnd(26)} ${t.rows}`),
                    `Verified: row counts equal, ${plural(verification.chains, 'audit chain')} intact with the source's heads, ${verification.keys_compared === 'all' ? 'every key row' : plural(verification.keys_compared, 'key row')} equal.`,
                  ].join('\n'),
              );
            } finally {
              await target.close();
            }
          },
          { prepare: 'none' },
        );
      }),
  );
}
