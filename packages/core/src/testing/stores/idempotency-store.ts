/** In memory: Idempotency records (IdempotencyStore) and their claims. */
import type { IdempotencyClaim, IdempotencyClaimRequest, IdempotencyRecord, IdempotencyStore, IdempotentResponse } from '../../ports/idempotency-store.js';
import { copyDate } from '../in-memory-tables.js';
import type { Session } from '../in-memory-session.js';

const idempotencyId = (organisationId: string, key: string): string => `${organisationId} ${key}`;

function copyIdempotentResponse(r: IdempotentResponse): IdempotentResponse {
  return { status: r.status, headers: { ...r.headers }, body: r.body };
}

function copyIdempotencyRecord(r: IdempotencyRecord): IdempotencyRecord {
  return {
    organisationId: r.organisationId,
    key: r.key,
    fingerprint: r.fingerprint,
    createdAt: copyDate(r.createdAt),
    expiresAt: copyDate(r.expiresAt),
    lockedUntil: copyDate(r.lockedUntil),
    response: r.response === null ? null : copyIdempotentResponse(r.response),
  };
}

export class InMemoryIdempotencyStore implements IdempotencyStore {
  constructor(private readonly session: Session) {}

  async claim(request: IdempotencyClaimRequest): Promise<IdempotencyClaim> {
    return this.session.write((t): IdempotencyClaim => {
      const id = idempotencyId(request.organisationId, request.key);
      const existing = t.idempotency.get(id);
      const now = request.now.getTime();
      const free =
        existing === undefined ||
        existing.record.expiresAt.getTime() <= now ||
        (existing.record.response === null && existing.record.lockedUntil.getTime() <= now);
      if (!free) return { kind: 'existing', record: copyIdempotencyRecord(existing.record) };
      const record: IdempotencyRecord = {
        organisationId: request.organisationId,
        key: request.key,
        fingerprint: request.fingerprint,
        createdAt: copyDate(request.now),
        expiresAt: copyDate(request.expiresAt),
        lockedUntil: copyDate(request.lockedUntil),
        response: null,
      };
      t.idempotency.set(id, { record, token: request.token });
      return { kind: 'claimed' };
    });
  }

  async complete(organisationId: string, key: string, token: string, response: IdempotentResponse): Promise<boolean> {
    return this.session.write((t) => {
      const id = idempotencyId(organisationId, key);
      const row = t.idempotency.get(id);
      if (row === undefined || row.token !== token || row.record.response !== null) return false;
      t.idempotency.set(id, { token, record: { ...row.record, response: copyIdempotentResponse(response) } });
      return true;
    });
  }

  async release(organisationId: string, key: string, token: string): Promise<boolean> {
    return this.session.write((t) => {
      const id = idempotencyId(organisationId, key);
      const row = t.idempotency.get(id);
      if (row === undefined || row.token !== token || row.record.response !== null) return false;
      return t.idempotency.delete(id);
    });
  }

  async sweep(now: Date): Promise<number> {
    return this.session.write((t) => {
      let n = 0;
      for (const [id, row] of t.idempotency) {
        if (row.record.expiresAt.getTime() <= now.getTime()) {
          t.idempotency.delete(id);
          n += 1;
        }
      }
      return n;
    });
  }
}
