/**
 * The in-memory store: a real implementation of every store port (not a mock), held to the same
 * contract suites as the SQL stores. Transactions work on a private copy of the tables; on commit
 * the transaction's writes are replayed, atomically, onto the then-current tables, so a failing
 * unit of work leaves no trace and writes made outside it meanwhile are kept. Units of work are serialised.
 *
 * One file per store in stores/ (as store-sql lays out its own) over the tables of in-memory-tables.ts
 * and the sessions of in-memory-session.ts; this file assembles them.
 */
import type { HealthProbe } from '../ports/health-probe.js';
import type { OuterStores, Stores, UnitOfWork } from '../ports/unit-of-work.js';
import type { StoreHarness } from './harness.js';
import { AutoCommitSession, Database, TransactionSession } from './in-memory-session.js';
import { storesOver } from './stores/index.js';

class InMemoryUnitOfWork implements UnitOfWork {
  constructor(private readonly db: Database) {}

  run<T>(work: (stores: OuterStores) => Promise<T>): Promise<T> {
    return this.transaction(NO_ORGANISATIONS, work);
  }

  changeCredentials<T>(organisationIds: readonly string[], work: (stores: Stores) => Promise<T>): Promise<T> {
    return this.transaction(new Set(organisationIds), work);
  }

  /** Its stores refuse a credential-affecting write of any organisation outside `declared`. */
  private async transaction<T>(declared: ReadonlySet<string>, work: (stores: Stores) => Promise<T>): Promise<T> {
    this.db.checkOpen();
    const release = await this.db.acquire();
    try {
      this.db.checkOpen();
      const session = new TransactionSession(this.db, declared);
      try {
        const result = await work(storesOver(session));
        session.commit();
        return result;
      } catch (error) {
        session.abandon();
        throw error;
      }
    } finally {
      release();
    }
  }
}

const NO_ORGANISATIONS: ReadonlySet<string> = new Set();

class InMemoryHealthProbe implements HealthProbe {
  constructor(private readonly db: Database) {}

  async ping(): Promise<void> {
    this.db.checkOpen();
  }
}

/**
 * A fresh, empty, transactional in-memory store. Units of work roll back on throw and run one at
 * a time; after `close()` every call rejects.
 */
export function createInMemoryStore(): StoreHarness {
  const db = new Database();
  return {
    stores: storesOver(new AutoCommitSession(db)),
    unitOfWork: new InMemoryUnitOfWork(db),
    health: new InMemoryHealthProbe(db),
    close: async () => {
      db.closed = true;
    },
  };
}
