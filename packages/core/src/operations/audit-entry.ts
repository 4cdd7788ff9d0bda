import type { AuditActor, AuditEntry, AuditKind, AuditMember } from '../domain/audit.js';
import type { Random } from '../ports/random.js';

/** A new audit entry (C-40, C-41); key fields null for organisation events. */
export function auditEntry(
  random: Random,
  kind: AuditKind,
  at: Date,
  actor: AuditActor,
  organisationId: string,
  key: { readonly id: string; readonly keyPrefix: string } | null = null,
  member?: AuditMember,
  detail: Pick<AuditEntry, 'webhook' | 'notification'> = {},
): AuditEntry {
  return {
    id: random.uuid(),
    kind,
    occurredAt: at,
    organisationId,
    keyId: key?.id ?? null,
    keyPrefix: key?.keyPrefix ?? null,
    actor,
    ...(member !== undefined ? { member: { id: member.id } } : {}),
    ...(detail.webhook !== undefined ? { webhook: { origin: detail.webhook.origin } } : {}),
    ...(detail.notification !== undefined ? { notification: { id: detail.notification.id, type: detail.notification.type } } : {}),
  };
}
