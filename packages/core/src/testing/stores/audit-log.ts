/** In memory: the audit log (AuditLog), each organisation's entries chained (C-63). */
import type { AuditActor, AuditEntry } from '../../domain/audit.js';
import { linkAuditEntry, type AuditHead, type ChainedAuditEntry } from '../../domain/audit-chain.js';
import type { AuditChainQuery, AuditFilter, AuditLog, AuditOutsideChain } from '../../ports/audit-log.js';
import type { PageRequest } from '../../ports/pagination.js';
import { copyAuditedKeyPolicy, copyDate, page, duplicateId } from '../in-memory-tables.js';
import type { Session } from '../in-memory-session.js';

function copyActor(a: AuditActor): AuditActor {
  if (a.type === 'api_key') return { type: 'api_key', keyId: a.keyId };
  if (a.type === 'operator') return a.name !== undefined ? { type: 'operator', name: a.name } : { type: 'operator' };
  return { type: a.type };
}

function copyAudit(e: ChainedAuditEntry): ChainedAuditEntry {
  return {
    ...copyEntry(e),
    seq: e.seq,
    prevHash: e.prevHash,
    hash: e.hash,
  };
}

function copyEntry(e: AuditEntry): AuditEntry {
  return {
    id: e.id,
    kind: e.kind,
    occurredAt: copyDate(e.occurredAt),
    organisationId: e.organisationId,
    keyId: e.keyId,
    keyPrefix: e.keyPrefix,
    actor: copyActor(e.actor),
    ...(e.exposure !== undefined ? { exposure: { type: e.exposure.type, url: e.exposure.url, source: e.exposure.source } } : {}),
    ...(e.member !== undefined ? { member: { id: e.member.id } } : {}),
    ...(e.roll !== undefined ? { roll: { toKeyId: e.roll.toKeyId, gracePeriodSeconds: e.roll.gracePeriodSeconds } } : {}),
    ...(e.webhook !== undefined ? { webhook: { origin: e.webhook.origin } } : {}),
    ...(e.notification !== undefined ? { notification: { id: e.notification.id, type: e.notification.type } } : {}),
    ...(e.descendantKeyIds !== undefined ? { descendantKeyIds: [...e.descendantKeyIds] } : {}),
    ...(e.keyPolicy !== undefined ? { keyPolicy: { old: copyAuditedKeyPolicy(e.keyPolicy.old), new: copyAuditedKeyPolicy(e.keyPolicy.new) } } : {}),
    ...(e.rateLimit !== undefined ? { rateLimit: { old: e.rateLimit.old, new: e.rateLimit.new } } : {}),
    ...(e.changedFields !== undefined ? { changedFields: [...e.changedFields] } : {}),
    ...(e.allowedCidrs !== undefined ? { allowedCidrs: e.allowedCidrs === null ? null : [...e.allowedCidrs] } : {}),
  };
}

export class InMemoryAuditLog implements AuditLog {
  constructor(private readonly session: Session) {}

  /** Linked when the write is applied (again at commit, onto the then-current head). */
  async append(entry: AuditEntry): Promise<ChainedAuditEntry> {
    const input = copyEntry(entry);
    const stored = this.session.write((t) => {
      if (t.audit.has(input.id)) throw duplicateId('Audit entry');
      const record = linkAuditEntry(input, t.auditHeads.get(input.organisationId) ?? null);
      t.audit.set(record.id, record);
      t.auditHeads.set(record.organisationId, { organisationId: record.organisationId, seq: record.seq, hash: record.hash });
      return record;
    });
    return copyAudit(stored);
  }

  async list(filter: AuditFilter, request: PageRequest): Promise<ChainedAuditEntry[]> {
    const { organisationId, kind } = filter;
    return this.session.read((t) =>
      page(
        [...t.audit.values()].filter(
          (e) => e.seq >= 1 && (organisationId === undefined || e.organisationId === organisationId) && (kind === undefined || e.kind === kind),
        ),
        (e) => ({ createdAt: e.occurredAt, id: e.id }),
        request,
        copyAudit,
      ),
    );
  }

  async chain(organisationId: string, q: AuditChainQuery): Promise<ChainedAuditEntry[]> {
    const since = q.since?.getTime();
    const until = q.until?.getTime();
    return this.session.read((t) =>
      [...t.audit.values()]
        .filter(
          (e) =>
            e.organisationId === organisationId &&
            e.seq > q.afterSeq &&
            (q.kind === undefined || e.kind === q.kind) &&
            (since === undefined || e.occurredAt.getTime() >= since) &&
            (until === undefined || e.occurredAt.getTime() < until),
        )
        .sort((a, b) => a.seq - b.seq)
        .slice(0, Math.max(0, q.limit))
        .map(copyAudit),
    );
  }

  /** Entries without a seq of at least 1 (`append` links every entry, so none unless a test put one in the table). */
  async outsideChain(organisationId?: string): Promise<AuditOutsideChain[]> {
    return this.session.read((t) => {
      const found = new Map<string, { entries: number; firstId: string }>();
      for (const e of t.audit.values()) {
        if ((organisationId !== undefined && e.organisationId !== organisationId) || (Number.isSafeInteger(e.seq) && e.seq >= 1)) continue;
        const f = found.get(e.organisationId);
        if (f === undefined) found.set(e.organisationId, { entries: 1, firstId: e.id });
        else found.set(e.organisationId, { entries: f.entries + 1, firstId: e.id < f.firstId ? e.id : f.firstId });
      }
      return [...found.keys()].sort().map((id) => ({ organisationId: id, ...found.get(id)! }));
    });
  }

  async heads(): Promise<AuditHead[]> {
    return this.session.read((t) =>
      [...t.auditHeads.values()]
        .sort((a, b) => (a.organisationId < b.organisationId ? -1 : a.organisationId > b.organisationId ? 1 : 0))
        .map((h) => ({ ...h })),
    );
  }
}
