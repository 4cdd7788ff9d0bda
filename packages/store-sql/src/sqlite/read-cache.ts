/**
 * The read fast path of a SQLite *file*, as ONE wrapper around the api-key and organisation stores:
 * `apiKeys.findCredential` and `organisations.findById` outside a unit of work are answered from
 * the read-only connection (reader.ts) and its cache, in the event loop's check phase after the call
 * (one header read for every call queued before it). The cache keeps answers only while no
 * transaction has committed to the file from any connection of any process (wal-index.ts), so a
 * cached answer is at least as fresh as a statement made at the call (C-36: a revoked key is refused
 * on the very next request). Every other method, and both until the reader is open, go to the
 * wrapped store.
 *
 * Installed by createSqlStore for `sqlite:<file>` URLs only (not ':memory:', where a second
 * connection would see another database; not Postgres; not a host's knex), and never inside a unit
 * of work, whose reads must see its own uncommitted writes.
 */
import type { ApiKeyStore, Credential, Organisation, OrganisationStore, Stores } from '@cos/core';
import type { ErrorTranslator } from '../errors.js';
import { CREDENTIAL, credentialFromRow } from '../stores/api-key-store.js';
import { ORGANISATION_BY_ID, organisationFromRow } from '../stores/organisation-store.js';
import type { SqliteReadConnection } from './reader.js';

/** `inner` with `overrides` in front; every other method is the inner store's own. */
function override<T extends object>(inner: T, overrides: Partial<T>): T {
  return Object.freeze(Object.assign(Object.create(inner) as T, overrides));
}

export function withSqliteReadCache(stores: Stores, reader: SqliteReadConnection, errors: ErrorTranslator): Stores {
  const { apiKeys, organisations } = stores;

  /** The cached answer when the reader is open, else `throughPool()` (which opens the reader once it succeeded). */
  function read<T extends object>(key: string, load: () => T | null, throughPool: () => Promise<T | null>): Promise<T | null> {
    if (!reader.ready) {
      return throughPool().then((value) => {
        reader.activate();
        return value;
      });
    }
    return reader.cached(key, () => {
      try {
        return load();
      } catch (e) {
        throw errors.translate(e);
      }
    });
  }

  return Object.freeze({
    ...stores,
    apiKeys: override<ApiKeyStore>(apiKeys, {
      findCredential: (digest: string): Promise<Credential | null> =>
        read(
          `credential:${digest}`,
          () => credentialFromRow(reader.get(CREDENTIAL, [digest])),
          () => apiKeys.findCredential(digest),
        ),
    }),
    organisations: override<OrganisationStore>(organisations, {
      findById: (id: string): Promise<Organisation | null> =>
        read(
          `organisation:${id}`,
          () => {
            const row = reader.get(ORGANISATION_BY_ID, [id]);
            return row === undefined ? null : organisationFromRow(row);
          },
          () => organisations.findById(id),
        ),
    }),
  });
}
