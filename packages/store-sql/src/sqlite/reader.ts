/**
 * The read fast path of a SQLite *file* (createSqlStore with `sqlite:<path>`, never `:memory:`): a
 * second, dedicated better-sqlite3 connection opened read-only, on which the hottest single-statement
 * reads outside a unit of work (`apiKeys.findCredential`, `organisations.findById`) run synchronously,
 * without waiting in the line of the store's connection (database.ts) and its promise hops.
 *
 * Why a connection of its own and not the store's one: the store's connection is also the one every
 * unit of work's transaction runs on, and a read on it while a unit of work is open would see that
 * transaction's uncommitted writes. This connection never writes and never holds a transaction, so
 * each statement is its own read transaction on the latest committed snapshot: in WAL mode (which the
 * store's connection sets on the file) it sees every write committed by any connection or process at once (C-36:
 * a revoked key is rejected on the very next request), never an uncommitted one, and it does not wait
 * for writers.
 *
 * It is opened lazily, only after a read through the store's connection has succeeded (so the file exists, is in
 * WAL mode and is migrated), and statements are prepared on first use and kept. If opening fails the
 * store stays on its own connection for good. close() closes it; it is never reopened afterwards.
 *
 * `cached()` keeps results for as long as no transaction has committed to the file, from any
 * connection of any process (wal-index.ts: a `pread` of the WAL-index header, where a statement
 * costs a read transaction's locks). Any commit empties the cache before the next answer, so a
 * cached read is exactly as fresh as a statement on this connection (C-36). Without a readable WAL
 * index it reads through every time.
 *
 * One header read answers every call made before it: `cached()` queues the lookup and the queue is
 * answered in the event loop's check phase (`setImmediate`), header first, then each lookup in the
 * order of the calls. The header is read after every queued call was made, so each answer is at
 * least as fresh as a read at the moment of its call: a request whose bytes Node read from its socket
 * after a commit returned is looked up after that commit (C-36), and every request of one poll phase
 * shares one system call instead of making one each.
 */
import { createRequire } from 'node:module';
import { WalIndexWatch } from './wal-index.js';

const require = createRequire(import.meta.url);

interface ReadStatement {
  get(...bindings: unknown[]): unknown;
}
interface ReadDatabase {
  prepare(sql: string): ReadStatement;
  pragma(source: string): unknown;
  close(): void;
}
type DatabaseClass = new (filename: string, options: { readonly: boolean; fileMustExist: boolean; timeout: number }) => ReadDatabase;

type State = 'idle' | 'open' | 'failed' | 'closed';

/** Most results `cached()` keeps; the oldest goes first. */
export const READ_CACHE_MAX_ENTRIES = 5_000;

/** A lookup waiting for the next header read. */
interface Queued {
  readonly key: string;
  readonly load: () => object | null;
  readonly resolve: (value: object | null) => void;
  readonly reject: (reason: unknown) => void;
}

export class SqliteReadConnection {
  private state: State = 'idle';
  private db: ReadDatabase | null = null;
  private readonly statements = new Map<string, ReadStatement>();
  private readonly watch: WalIndexWatch;
  private readonly results = new Map<string, object>();
  /** Lookups waiting for the next header read (answerQueue). */
  private queue: Queued[] = [];
  /** The WAL-index header `results` were read under (valid when `resultsValid`). */
  private readonly resultsAt = Buffer.alloc(48);
  private resultsValid = false;

  constructor(
    private readonly filename: string,
    /** busy_timeout in ms, as on the store's connection (only a WAL recovery or a non-WAL file makes a reader wait). */
    private readonly busyTimeoutMs: number,
  ) {
    this.watch = new WalIndexWatch(filename);
  }

  /** True when reads may be served here (opened, not closed). */
  get ready(): boolean {
    return this.state === 'open';
  }

  /**
   * Opens the connection after the store's connection has answered a read (file present, WAL, migrated). A failure
   * leaves the store on its own connection; nothing is thrown.
   */
  activate(): void {
    if (this.state !== 'idle') return;
    try {
      const Database = require('better-sqlite3') as DatabaseClass;
      const db = new Database(this.filename, { readonly: true, fileMustExist: true, timeout: this.busyTimeoutMs });
      this.db = db;
      this.state = 'open';
      this.watch.open();
    } catch {
      this.state = 'failed';
    }
  }

  /**
   * The first row of a SELECT (or undefined), synchronously. Throws the driver's error (to be
   * translated by the caller, as on the store's connection).
   */
  get(sql: string, bindings: readonly unknown[]): Record<string, unknown> | undefined {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = this.db!.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement.get(...bindings) as Record<string, unknown> | undefined;
  }

  /**
   * `load()`'s answer for `key`, kept while no transaction commits to the database. Answered, with
   * every other call queued before it, after one read of the header made after the call (see the
   * file's header). The header is read before any `load()` of the queue runs, so a commit in between
   * makes the next queue read again. Null answers are not kept (unknown keys must not fill the
   * cache). Rejects with what `load()` throws.
   */
  cached<T extends object>(key: string, load: () => T | null): Promise<T | null> {
    return new Promise<T | null>((resolve, reject) => {
      this.queue.push({ key, load, resolve: resolve as (value: object | null) => void, reject });
      if (this.queue.length === 1) setImmediate(this.answerQueue);
    });
  }

  /** Reads the header once, then answers the queued lookups in order (a commit by one `load()` shows from the next queue on). */
  private readonly answerQueue = (): void => {
    const queue = this.queue;
    if (queue.length === 0) return;
    this.queue = [];
    const header = this.state === 'open' ? this.watch.read() : null;
    if (header === null) this.forget();
    else if (!this.resultsValid || !header.equals(this.resultsAt)) {
      this.results.clear();
      header.copy(this.resultsAt);
      this.resultsValid = true;
    }
    for (const q of queue) {
      try {
        q.resolve(this.answer(q.key, q.load));
      } catch (e) {
        q.reject(e);
      }
    }
  };

  private answer(key: string, load: () => object | null): object | null {
    if (!this.resultsValid) return load();
    const hit = this.results.get(key);
    if (hit !== undefined) return hit;
    const value = load();
    if (value !== null) {
      if (this.results.size >= READ_CACHE_MAX_ENTRIES) this.results.delete(this.results.keys().next().value as string);
      this.results.set(key, value);
    }
    return value;
  }

  /** Number of kept results (tests, diagnostics). */
  get cachedEntries(): number {
    return this.results.size;
  }

  private forget(): void {
    this.results.clear();
    this.resultsValid = false;
  }

  /** Answers what is queued first (on the connection still open), then closes. */
  close(): void {
    this.answerQueue();
    const db = this.db;
    this.state = 'closed';
    this.db = null;
    this.statements.clear();
    this.forget();
    this.watch.close();
    db?.close();
  }
}
