/**
 * Sessions over the in-memory tables: auto-commit (each call its own transaction) or a unit of
 * work's, which works on a private copy and replays its writes onto the current tables on commit.
 */
import { assertCredentialChangeDeclared } from '../access/credential-change.js';
import { type Tables, type Write, emptyTables, cloneTables } from './in-memory-tables.js';

/** Where the stores read and write: the shared tables directly, or a transaction's copy. */
export interface Session {
  read<T>(fn: (tables: Tables) => T): T;
  write<T>(op: Write<T>): T;
  /** Before a credential-affecting write: throws inside a unit of work that did not declare the organisation. */
  credentialWrite(organisationId: string, write: string): void;
}

export class Database {
  tables: Tables = emptyTables();
  closed = false;
  #queue: Promise<void> = Promise.resolve();

  checkOpen(): void {
    if (this.closed) throw new Error('The in-memory store is closed');
  }

  /** Serialises units of work: resolves with a release function once every earlier run is done. */
  async acquire(): Promise<() => void> {
    let release!: () => void;
    const next = new Promise<void>((resolve) => (release = resolve));
    const previous = this.#queue;
    this.#queue = previous.then(() => next);
    await previous;
    return release;
  }
}

export class AutoCommitSession implements Session {
  constructor(private readonly db: Database) {}

  read<T>(fn: (tables: Tables) => T): T {
    this.db.checkOpen();
    return fn(this.db.tables);
  }

  write<T>(op: Write<T>): T {
    this.db.checkOpen();
    return op(this.db.tables);
  }

  /** Outside a unit of work each call is its own transaction: nothing to declare. */
  credentialWrite(): void {}
}

export class TransactionSession implements Session {
  readonly #db: Database;
  readonly #working: Tables;
  readonly #log: Array<Write<unknown>> = [];
  #finished = false;

  readonly #declared: ReadonlySet<string>;

  constructor(db: Database, declared: ReadonlySet<string>) {
    this.#db = db;
    this.#working = cloneTables(db.tables);
    this.#declared = declared;
  }

  credentialWrite(organisationId: string, write: string): void {
    this.#check();
    assertCredentialChangeDeclared(this.#declared, organisationId, write);
  }

  #check(): void {
    this.#db.checkOpen();
    if (this.#finished) throw new Error('This unit of work has already finished');
  }

  read<T>(fn: (tables: Tables) => T): T {
    this.#check();
    return fn(this.#working);
  }

  write<T>(op: Write<T>): T {
    this.#check();
    const result = op(this.#working);
    this.#log.push(op);
    return result;
  }

  /** Replays the writes onto a copy of the current tables, then swaps: all or nothing. */
  commit(): void {
    this.#check();
    this.#finished = true;
    const next = cloneTables(this.#db.tables);
    for (const op of this.#log) op(next);
    this.#db.tables = next;
  }

  abandon(): void {
    this.#finished = true;
  }
}
