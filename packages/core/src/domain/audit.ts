/** Audit entries (C-40, C-41): append-only governance events. */

export type AuditKind = 'api_key_revoked' | 'api_key_issued' | 'organisation_created' | 'organisation_updated';
export const AUDIT_KINDS: readonly AuditKind[] = [
  'api_key_revoked',
  'api_key_issued',
  'organisation_created',
  'organisation_updated',
];

/** Who did it: an API key over HTTP, or the operator through the CLI. */
export type AuditActor = { readonly type: 'api_key'; readonly keyId: string } | { readonly type: 'operator' };

export interface AuditEntry {
  readonly id: string;
  readonly kind: AuditKind;
  readonly occurredAt: Date;
  readonly organisationId: string;
  /** Set for key events, null for organisation events. */
  readonly keyId: string | null;
  readonly keyPrefix: string | null;
  readonly actor: AuditActor;
}
