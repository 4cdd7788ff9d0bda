/**
 * List queries (C-5, C-6): `limit` integer 1..100 (default 20; decimal strings from a query string
 * accepted), `cursor` an opaque keyset cursor. Unknown parameters are ignored.
 */
import { z } from 'zod';
import { AUDIT_KINDS, type AuditKind } from '../domain/audit.js';
import type { ErrorDetail } from '../domain/errors.js';
import type { KeysetPosition } from '../ports/pagination.js';
import { decodeCursor, decodeSeqCursor } from './cursor.js';
import { checkUuid } from './ids.js';
import { checkThrowing, detailsFromIssues, invalid, isJsonObject, valid, type Checked } from './issues.js';

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;
export const ISSUE_LIMIT = `must be an integer from 1 to ${MAX_LIMIT}`;
export const ISSUE_CURSOR = 'must be a string';
export const ISSUE_KIND = `must be one of ${AUDIT_KINDS.join(', ')}`;
export const ISSUE_QUERY = 'must be an object';
export const ISSUE_TIMESTAMP = 'must be an ISO 8601 timestamp with a time zone';
export const ISSUE_UNTIL = 'must be later than since';

const limit = z
  .union([z.number(), z.string().regex(/^[0-9]{1,4}$/).transform(Number)], { error: ISSUE_LIMIT })
  .pipe(z.number().int({ error: ISSUE_LIMIT }).min(1, { error: ISSUE_LIMIT }).max(MAX_LIMIT, { error: ISSUE_LIMIT }));

const listQuerySchema = z.object({
  limit: limit.optional(),
  cursor: z.string({ error: ISSUE_CURSOR }).optional(),
});

export interface ListQuery {
  readonly limit: number;
  readonly after: KeysetPosition | null;
}

export interface AuditQuery extends ListQuery {
  readonly organisationId?: string;
  readonly kind?: AuditKind;
}

function asObject(query: unknown): Checked<Record<string, unknown>> {
  if (query === undefined || query === null) return valid({});
  if (!isJsonObject(query)) return invalid([{ field: 'query', issue: ISSUE_QUERY }]);
  return valid(query);
}

export function checkListQuery(query: unknown): Checked<ListQuery> {
  const obj = asObject(query);
  if (!obj.ok) return obj;
  const parsed = listQuerySchema.safeParse(obj.value);
  if (!parsed.success) {
    const details: ErrorDetail[] = detailsFromIssues(obj.value, parsed.error.issues);
    // A well-typed but undecodable cursor is reported together with a bad limit.
    const cursor = obj.value['cursor'];
    if (typeof cursor === 'string' && !details.some((d) => d.field === 'cursor')) {
      const c = checkThrowing(() => decodeCursor(cursor));
      if (!c.ok) details.push(...c.details);
    }
    return invalid(details);
  }
  const { limit: l, cursor } = parsed.data;
  if (cursor === undefined) return valid({ limit: l ?? DEFAULT_LIMIT, after: null });
  const after = checkThrowing(() => decodeCursor(cursor));
  if (!after.ok) return after;
  return valid({ limit: l ?? DEFAULT_LIMIT, after: after.value });
}

/** Audit query: {org?, kind?, limit?, cursor?}. */
export function checkAuditQuery(query: unknown): Checked<AuditQuery> {
  const obj = asObject(query);
  if (!obj.ok) return obj;
  const details: ErrorDetail[] = [];
  const list = checkListQuery(obj.value);
  if (!list.ok) details.push(...list.details);
  let organisationId: string | undefined;
  const org = obj.value['org'];
  if (org !== undefined) {
    const c = checkUuid(org, 'org');
    if (c.ok) organisationId = c.value;
    else details.push(...c.details);
  }
  let kind: AuditKind | undefined;
  const k = obj.value['kind'];
  if (k !== undefined) {
    if (typeof k === 'string' && (AUDIT_KINDS as readonly string[]).includes(k)) kind = k as AuditKind;
    else details.push({ field: 'kind', issue: ISSUE_KIND });
  }
  if (details.length > 0 || !list.ok) return invalid(details);
  return valid({
    ...list.value,
    ...(organisationId !== undefined ? { organisationId } : {}),
    ...(kind !== undefined ? { kind } : {}),
  });
}

/** An organisation's audit events (C-63): {limit?, cursor?, kind?, since?, until?}; `cursor` a seq cursor. */
export interface AuditEventsQuery {
  readonly limit: number;
  readonly afterSeq: number;
  readonly kind?: AuditKind;
  readonly since?: Date;
  readonly until?: Date;
}

/** ISO 8601 with date, time and a zone (Z or ±hh:mm), e.g. 2026-06-10T12:00:00Z. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** An ISO_INSTANT string as a Date; null for anything else. */
export function instant(value: unknown): Date | null {
  if (typeof value !== 'string' || !ISO_INSTANT.test(value)) return null;
  const at = new Date(value);
  return Number.isNaN(at.getTime()) ? null : at;
}

export function checkAuditEventsQuery(query: unknown): Checked<AuditEventsQuery> {
  const obj = asObject(query);
  if (!obj.ok) return obj;
  const details: ErrorDetail[] = [];
  const parsed = listQuerySchema.shape.limit.safeParse(obj.value['limit']);
  if (!parsed.success) details.push({ field: 'limit', issue: ISSUE_LIMIT });
  let afterSeq = 0;
  const cursor = obj.value['cursor'];
  if (cursor !== undefined) {
    if (typeof cursor !== 'string') details.push({ field: 'cursor', issue: ISSUE_CURSOR });
    else {
      const c = checkThrowing(() => decodeSeqCursor(cursor));
      if (c.ok) afterSeq = c.value;
      else details.push(...c.details);
    }
  }
  let kind: AuditKind | undefined;
  const k = obj.value['kind'];
  if (k !== undefined) {
    if (typeof k === 'string' && (AUDIT_KINDS as readonly string[]).includes(k)) kind = k as AuditKind;
    else details.push({ field: 'kind', issue: ISSUE_KIND });
  }
  const bounds: { since?: Date; until?: Date } = {};
  for (const field of ['since', 'until'] as const) {
    const raw = obj.value[field];
    if (raw === undefined) continue;
    const at = instant(raw);
    if (at === null) details.push({ field, issue: ISSUE_TIMESTAMP });
    else bounds[field] = at;
  }
  if (bounds.since !== undefined && bounds.until !== undefined && bounds.until.getTime() <= bounds.since.getTime()) {
    details.push({ field: 'until', issue: ISSUE_UNTIL });
  }
  if (details.length > 0 || !parsed.success) return invalid(details);
  return valid({
    limit: parsed.data ?? DEFAULT_LIMIT,
    afterSeq,
    ...(kind !== undefined ? { kind } : {}),
    ...bounds,
  });
}
