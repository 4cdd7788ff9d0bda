/**
 * Example 1: call the core's use cases directly from a host service, on the SQL store over the
 * host's own knex instance. No HTTP, no container.
 *
 *   node --import tsx --conditions=source examples/01-core-with-sql-store.ts
 */
import { pathToFileURL } from 'node:url';
import knex, { type Knex } from 'knex';
import {
  apiKeyView,
  auditEntryView,
  createCore,
  isDomainError,
  InProcessRateCounter,
  listView,
  memberView,
  OPERATOR,
  organisationView,
} from '@cos/core';
import { createSqlStoreFromKnex } from '@cos/store-sql';

/**
 * The host service's own knex. Here: SQLite in memory, on one connection (for ':memory:' that
 * connection is the database) with foreign keys on. A Postgres host passes its `pg` knex instead,
 * ideally with `searchPath: ['compliance']` so that the service's tables live in their own schema.
 */
export function createHostKnex(): Knex {
  return knex({
    client: 'better-sqlite3',
    connection: { filename: ':memory:' },
    useNullAsDefault: true,
    pool: {
      min: 1,
      max: 1,
      afterCreate(conn: { pragma(sql: string): unknown }, done: (err: Error | null, conn: unknown) => void) {
        conn.pragma('foreign_keys = ON');
        done(null, conn);
      },
    },
  });
}

/** The error code a call fails with (the codes of spec §7). */
async function codeOf(call: () => Promise<unknown>): Promise<string> {
  try {
    await call();
    return 'none';
  } catch (err) {
    if (isDomainError(err)) return err.code;
    throw err;
  }
}

export async function main(hostKnex?: Knex) {
  const db = hostKnex ?? createHostKnex();
  // The host owns its knex: store.close() leaves it open (pass { destroyOnClose: true } otherwise).
  const store = createSqlStoreFromKnex(db);
  try {
    const migrations = await store.migrate();
    const core = createCore({
      stores: store.stores,
      unitOfWork: store.unitOfWork,
      health: store.health,
      // One process, no Redis: the core's own in-process counter (@cos/limiter-redis shares one across instances).
      counter: new InProcessRateCounter(),
      config: { rateLimitPerMinute: 100 },
    });

    // The operator (the host's own trusted code) may do everything, including what the API never allows.
    const acme = await core.organisations.create(OPERATOR, { name: 'Acme Ltd', slug: 'acme' });
    await core.organisations.classify(OPERATOR, acme.id, 'C');
    await core.members.add(OPERATOR, acme.id, { email: 'ada@acme.example' });
    const issued = await core.apiKeys.issue(OPERATOR, acme.id, { label: 'billing service', environment: 'test' });
    // issued.rawKey is the only copy of the key: hand it to its owner now; only its digest is stored.

    // A request arrives with that key: authenticate, count it against the organisation, then act as the key.
    const principal = await core.authenticator.authenticate(`Bearer ${issued.rawKey}`);
    const decision = await core.rateLimiter.enforce({ kind: 'organisation', organisationId: principal.organisationId });
    const organisation = await core.organisations.get(principal, acme.id);
    const members = await core.members.list(principal, acme.id, { limit: '10' });
    const keys = await core.apiKeys.list(principal, acme.id, {});
    // A standard key may not list every organisation (platform keys only).
    const listAsStandardKey = await codeOf(() => core.organisations.list(principal, {}));

    // Revocation is immediate: the next authentication with that key fails.
    await core.apiKeys.revoke(principal, acme.id, issued.key.id);
    const afterRevoke = await codeOf(() => core.authenticator.authenticate(`Bearer ${issued.rawKey}`));

    const now = core.clock.now();
    const audit = await core.audit.list(OPERATOR, { org: acme.id });
    return {
      dialect: store.dialect,
      migrations,
      organisation: organisationView(organisation),
      members: listView(members, memberView),
      keys: listView(keys, (k) => apiKeyView(k, now)),
      revokedKey: apiKeyView(await core.apiKeys.get(OPERATOR, acme.id, issued.key.id), now),
      rateLimit: { limit: decision.limit, remaining: decision.remaining },
      listAsStandardKey,
      afterRevoke,
      audit: listView(audit, auditEntryView).data.map((e) => e.kind),
    };
  } finally {
    await store.close();
    if (hostKnex === undefined) await db.destroy();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await main(), null, 2));
}
