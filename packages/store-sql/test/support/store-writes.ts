/**
 * Writes to a SQLite file described as JSON, so that a store in this process and a child process
 * (sqlite-process.ts `serve`) run exactly the same code: each resolves once the write has committed.
 * `unitOfWork` runs it inside `store.unitOfWork.run`, otherwise as a single statement outside one.
 */
import type { ApiKey } from '@cos/core';
import { newAuditEntry, storePorts } from '@cos/core/testing/contracts';
import type { SqlStore } from '@cos/store-sql';

/** An ApiKey with its dates as epoch milliseconds. */
export interface KeyJson {
  readonly id: string;
  readonly organisationId: string;
  readonly label: string;
  readonly keyPrefix: string;
  readonly digest: string;
  readonly expiresAt: number | null;
  readonly createdAt: number;
  readonly revokedAt: number | null;
}

export type WriteCommand =
  | { readonly op: 'insert'; readonly key: KeyJson; readonly unitOfWork: boolean }
  | { readonly op: 'revoke'; readonly organisationId: string; readonly keyId: string; readonly at: number; readonly unitOfWork: boolean }
  | { readonly op: 'rename'; readonly organisationId: string; readonly name: string; readonly at: number; readonly unitOfWork: boolean }
  /** `is_system` has no store method (only bootstrap sets it): one UPDATE on the store's pool. */
  | { readonly op: 'system'; readonly organisationId: string; readonly isSystem: boolean }
  /** A TRUNCATE checkpoint (restarts the WAL when no reader is in the way): content unchanged. */
  | { readonly op: 'checkpoint' }
  /** One audit entry appended to the organisation's chain; answers the seq it was linked at. */
  | { readonly op: 'append'; readonly organisationId: string; readonly unitOfWork: boolean };

export function keyToJson(k: ApiKey): KeyJson {
  return {
    id: k.id,
    organisationId: k.organisationId,
    label: k.label,
    keyPrefix: k.keyPrefix,
    digest: k.digest,
    expiresAt: k.expiresAt?.getTime() ?? null,
    createdAt: k.createdAt.getTime(),
    revokedAt: k.revokedAt?.getTime() ?? null,
  };
}

export function keyFromJson(k: KeyJson): ApiKey {
  return {
    ...k,
    expiresAt: k.expiresAt === null ? null : new Date(k.expiresAt),
    createdAt: new Date(k.createdAt),
    revokedAt: k.revokedAt === null ? null : new Date(k.revokedAt),
  };
}

/** Runs the write; resolves with what the store answered (true/false, a row count, the checkpoint's row). */
export async function applyWrite(store: SqlStore, command: WriteCommand): Promise<unknown> {
  switch (command.op) {
    case 'insert': {
      const key = keyFromJson(command.key);
      if (command.unitOfWork) await store.unitOfWork.run((tx) => tx.apiKeys.insert(key));
      else await store.stores.apiKeys.insert(key);
      return true;
    }
    case 'revoke': {
      const { organisationId, keyId } = command;
      const at = new Date(command.at);
      return command.unitOfWork
        ? store.unitOfWork.changeCredentials([organisationId], (tx) => tx.apiKeys.revoke(organisationId, keyId, at))
        : storePorts(store).apiKeys.revoke(organisationId, keyId, at);
    }
    case 'rename': {
      const { organisationId } = command;
      const changes = { name: command.name, updatedAt: new Date(command.at) };
      const updated = command.unitOfWork
        ? await store.unitOfWork.changeCredentials([organisationId], (tx) => tx.organisations.update(organisationId, changes))
        : await storePorts(store).organisations.update(organisationId, changes);
      return updated !== null;
    }
    case 'system': {
      const result = (await store.knex.raw('UPDATE organisations SET is_system = ? WHERE id = ?', [command.isSystem, command.organisationId])) as {
        changes?: number;
      };
      return result.changes ?? null;
    }
    case 'checkpoint':
      return store.knex.raw('PRAGMA wal_checkpoint(TRUNCATE)');
    case 'append': {
      const entry = newAuditEntry(command.organisationId, { actor: { type: 'operator', name: `process ${process.pid}` } });
      const chained = command.unitOfWork ? await store.unitOfWork.run((tx) => tx.audit.append(entry)) : await store.stores.audit.append(entry);
      return chained.seq;
    }
  }
}
