/**
 * The in-memory store: a real implementation of every store port (not a mock), held to the same
 * contract suites as the SQL stores. Transactions work on a private copy of the tables; on commit
 * the transaction's writes are replayed, atomically, onto the then-current tables, so a failing
 * `run` leaves no trace and writes made outside the run meanwhile are kept. Runs are serialised.
 *
 * One file per store in stores/ (as store-sql lays out its own) over the tables of in-memory-tables.ts
 * and the sessions of in-memory-session.ts; this file assembles them.
 */
import type { HealthProbe } from '../ports/health-probe.js';
import type { Stores, UnitOfWork, WorkDeclaration } from '../ports/unit-of-work.js';
import { declaredOrganisations } from '../access/credential-change.js';
import type { StoreHarness } from './harness.js';
import { AutoCommitSession, Database, TransactionSession } from './in-memory-session.js';
import { storesOver } from './stores/index.js';

class InMemoryUnitOfWork implements UnitOfWork {
  constructor(private readonly db: Database) {}

  async run<T>(work: (stores: Stores) => Promise<T>, declaration?: WorkDeclaration): Promise<T> {
    const declared = declaredOrganisations(declaration);
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

class InMemoryHealthProbe implements HealthProbe {
  constructor(private readonly db: Database) {}

  async ping(): Promise<void> {
    this.db.checkOpen();
  }
}

/**
 * A fresh, empty, transactional in-memory store. `unitOfWork.run` rolls back on throw and runs
 * one at a time; after `close()` every call rejects.
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
