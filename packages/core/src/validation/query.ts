/**
 * List queries (C-5, C-6): `limit` integer 1..100 (default 20; decimal strings from a query string
 * accepted), `cursor` an opaque keyset cursor. Unknown parameters are ignored.
 */
import { z } from 'zod';
import { AUDIT_KINDS, type AuditKind } from '../domain/audit.js';
import type { ErrorDetail } from '../domain/errors.js';
import type { KeysetPosition } from '../ports/pagination.js';
import { decodeCursor } from './cursor.js';
import { checkUuid } from './ids.js';
import { checkThrowing, detailsFromIssues, invalid, isJsonObject, valid, type Checked } from './issues.js';

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;
export const ISSUE_LIMIT = `must be an integer from 1 to ${MAX_LIMIT}`;
export const ISSUE_CURSOR = 'must be a string';
export const ISSUE_KIND = `must be one of ${AUDIT_KINDS.join(', ')}`;
export const ISSUE_QUERY = 'must be an object';

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
