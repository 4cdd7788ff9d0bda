import type { AuditActor, AuditEntry, AuditFilter, AuditKind, AuditLog, KeyPolicyChange, PageRequest, WebhookEventType } from '@cos/core';
import { execute, query, stringOrNull, toDate, type StoreContext } from '../context.js';
import { KeysetListSql } from '../keyset-list.js';

const COLUMNS =
  'id, kind, occurred_at, organisation_id, key_id, key_prefix, actor_type, actor_key_id, exposure_type, exposure_url, exposure_source, actor_name, member_id, member_email, rolled_to_key_id, grace_period_seconds, webhook_origin, notification_id, notification_type, descendant_key_ids, key_policy';

/** Space-joined ids ('' for none). */
function idsFromText(text: string): string[] {
  return text === '' ? [] : text.split(' ');
}

function actorFromRow(row: Record<string, unknown>): AuditActor {
  if (row.actor_type === 'api_key') return { type: 'api_key', keyId: String(row.actor_key_id) };
  if (row.actor_type === 'operator' && typeof row.actor_name === 'string') return { type: 'operator', name: row.actor_name };
  return { type: String(row.actor_type) as Exclude<AuditActor['type'], 'api_key'> };
}

function entryFromRow(row: Record<string, unknown>): AuditEntry {
  const entry: AuditEntry = {
    id: String(row.id),
    kind: String(row.kind) as AuditKind,
    occurredAt: toDate(row.occurred_at),
    organisationId: String(row.organisation_id),
    keyId: stringOrNull(row.key_id),
    keyPrefix: stringOrNull(row.key_prefix),
    actor: actorFromRow(row),
  };
  // Only entries that have one carry the property (C-58: api_key_exposed; member_added/_removed; api_key_rolled;
  // webhook_endpoint_set/_removed, webhook_secret_rotated; notification_retried).
  const hasExposure = row.exposure_type !== null && row.exposure_type !== undefined;
  const hasMember = row.member_id !== null && row.member_id !== undefined;
  const hasRoll = row.rolled_to_key_id !== null && row.rolled_to_key_id !== undefined;
  const hasWebhook = row.webhook_origin !== null && row.webhook_origin !== undefined;
  const hasNotification = row.notification_id !== null && row.notification_id !== undefined;
  const hasDescendants = row.descendant_key_ids !== null && row.descendant_key_ids !== undefined;
  const hasPolicy = row.key_policy !== null && row.key_policy !== undefined;
  if (!hasExposure && !hasMember && !hasRoll && !hasWebhook && !hasNotification && !hasDescendants && !hasPolicy) return entry;
  return {
    ...entry,
    ...(hasExposure
      ? { exposure: { type: String(row.exposure_type), url: stringOrNull(row.exposure_url), source: stringOrNull(row.exposure_source) } }
      : {}),
    ...(hasMember ? { member: { id: String(row.member_id), email: String(row.member_email) } } : {}),
    ...(hasRoll ? { roll: { toKeyId: String(row.rolled_to_key_id), gracePeriodSeconds: Number(row.grace_period_seconds) } } : {}),
    ...(hasWebhook ? { webhook: { origin: String(row.webhook_origin) } } : {}),
    ...(hasNotification ? { notification: { id: String(row.notification_id), type: String(row.notification_type) as WebhookEventType } } : {}),
    ...(hasDescendants ? { descendantKeyIds: idsFromText(String(row.descendant_key_ids)) } : {}),
    ...(hasPolicy ? { keyPolicy: JSON.parse(String(row.key_policy)) as KeyPolicyChange } : {}),
  };
}

const INSERT = `INSERT INTO audit_entries (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const LIST = new KeysetListSql('audit_entries', COLUMNS, 'occurred_at', ['organisation_id', 'kind']);

/** Append-only (C-41): this class has no update and no delete. */
export class SqlAuditLog implements AuditLog {
  constructor(private readonly ctx: StoreContext) {}

  async append(e: AuditEntry): Promise<void> {
    await execute(this.ctx, INSERT, [
      e.id,
      e.kind,
      e.occurredAt.getTime(),
      e.organisationId,
      e.keyId,
      e.keyPrefix,
      e.actor.type,
      e.actor.type === 'api_key' ? e.actor.keyId : null,
      e.exposure?.type ?? null,
      e.exposure?.url ?? null,
      e.exposure?.source ?? null,
      e.actor.type === 'operator' ? (e.actor.name ?? null) : null,
      e.member?.id ?? null,
      e.member?.email ?? null,
      e.roll?.toKeyId ?? null,
      e.roll?.gracePeriodSeconds ?? null,
      e.webhook?.origin ?? null,
      e.notification?.id ?? null,
      e.notification?.type ?? null,
      e.descendantKeyIds !== undefined ? e.descendantKeyIds.join(' ') : null,
      e.keyPolicy !== undefined ? JSON.stringify(e.keyPolicy) : null,
    ]);
  }

  async list(filter: AuditFilter, page: PageRequest): Promise<AuditEntry[]> {
    const { sql, bindings } = LIST.build([filter.organisationId, filter.kind], page);
    const rows = await query(this.ctx, sql, bindings);
    return rows.map(entryFromRow);
  }
}
