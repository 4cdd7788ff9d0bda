/**
 * The write traffic of `cos-admin key issue` / `key revoke` and of `serve`, shared by the in-process
 * side of sqlite-multi-process.test.ts and its child process (sqlite-process.ts): `count` chains run
 * concurrently, each issuing a key through the core (a unit of work: organisation lookup,
 * countActive, insert, api_key_issued entry) and then revoking it (a unit of work: findById, revoke,
 * api_key_revoked entry). Failures are collected, not thrown, so a caller sees every one of them.
 */
import { createCore, InProcessRateCounter, OPERATOR, type CoreConfig } from '@cos/core';
import type { SqlStore } from '@cos/store-sql';

export interface ChurnFailure {
  readonly name: string;
  readonly message: string;
  /** The driver's code behind a translated error (e.g. SQLITE_BUSY_SNAPSHOT under UnavailableError). */
  readonly causeCode: string | null;
}

export interface ChurnResult {
  /** Ids of the keys issued (and then revoked) without any error. */
  readonly issued: string[];
  readonly failures: ChurnFailure[];
  /** Epoch ms of the first unit of work's start and the last one's end (to show two runs overlapped). */
  readonly startedAt: number;
  readonly finishedAt: number;
}

function failure(e: unknown): ChurnFailure {
  const err = e as { name?: unknown; message?: unknown; cause?: { code?: unknown } };
  return {
    name: typeof err.name === 'string' ? err.name : 'Error',
    message: typeof err.message === 'string' ? err.message : String(e),
    causeCode: typeof err.cause?.code === 'string' ? err.cause.code : null,
  };
}

export async function churn(store: SqlStore, organisationId: string, count: number, label: string, config: Partial<CoreConfig> = {}): Promise<ChurnResult> {
  const core = createCore({ ...store, counter: new InProcessRateCounter(), config });
  const issued: string[] = [];
  const failures: ChurnFailure[] = [];
  const startedAt = Date.now();
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      try {
        const { key } = await core.apiKeys.issue(OPERATOR, organisationId, { label: `${label} ${i}` });
        await core.apiKeys.revoke(OPERATOR, organisationId, key.id);
        issued.push(key.id);
      } catch (e) {
        failures.push(failure(e));
      }
    }),
  );
  return { issued, failures, startedAt, finishedAt: Date.now() };
}
