import type { KeyEnvironment, KeyPolicy, NaceSection, Organisation, OrganisationChanges, OrganisationStore, PageRequest } from '@cos/core';
import { credentialWrite, execute, numberOrNull, query, toBool, toDate, type StoreContext } from '../context.js';

const ORGANISATION_COLUMNS = 'id, name, slug, industry_section, is_system, rate_limit_per_minute, created_at, updated_at';

export function organisationFromRow(row: Record<string, unknown>): Organisation {
  return {
    id: String(row.id),
    name: String(row.name),
    slug: String(row.slug),
    industrySection: row.industry_section === null || row.industry_section === undefined ? null : (String(row.industry_section) as NaceSection),
    isSystem: toBool(row.is_system),
    rateLimitPerMinute: numberOrNull(row.rate_limit_per_minute),
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
  };
}

const INSERT = `INSERT INTO organisations (${ORGANISATION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;
export const ORGANISATION_BY_ID = `SELECT ${ORGANISATION_COLUMNS} FROM organisations WHERE id = ?`;
const FIRST_SYSTEM = `SELECT ${ORGANISATION_COLUMNS} FROM organisations WHERE is_system = ? ORDER BY created_at, id LIMIT 1`;
const LIST_FIRST = `SELECT ${ORGANISATION_COLUMNS} FROM organisations ORDER BY created_at, id LIMIT ?`;
const LIST_AFTER = `SELECT ${ORGANISATION_COLUMNS} FROM organisations WHERE (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?`;

const KEY_POLICY =
  'SELECT max_lifetime_seconds, allowed_environments, exposure_response, expiry_notice_seconds FROM organisation_key_policies WHERE organisation_id = ?';
/** One statement: insert the organisation's policy or replace the one it has. */
const PUT_KEY_POLICY = `INSERT INTO organisation_key_policies (organisation_id, max_lifetime_seconds, allowed_environments, exposure_response, expiry_notice_seconds, updated_at)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (organisation_id) DO UPDATE SET max_lifetime_seconds = excluded.max_lifetime_seconds,
    allowed_environments = excluded.allowed_environments, exposure_response = excluded.exposure_response,
    expiry_notice_seconds = excluded.expiry_notice_seconds, updated_at = excluded.updated_at`;

export class SqlOrganisationStore implements OrganisationStore {
  constructor(private readonly ctx: StoreContext) {}

  async create(o: Organisation): Promise<void> {
    await execute(this.ctx, INSERT, [o.id, o.name, o.slug, o.industrySection, o.isSystem, o.rateLimitPerMinute, o.createdAt.getTime(), o.updatedAt.getTime()]);
  }

  async findById(id: string): Promise<Organisation | null> {
    const rows = await query(this.ctx, ORGANISATION_BY_ID, [id]);
    return rows.length === 0 ? null : organisationFromRow(rows[0]!);
  }

  async findFirstSystem(): Promise<Organisation | null> {
    const rows = await query(this.ctx, FIRST_SYSTEM, [true]);
    return rows.length === 0 ? null : organisationFromRow(rows[0]!);
  }

  async update(id: string, changes: OrganisationChanges): Promise<Organisation | null> {
    credentialWrite(this.ctx, id, 'organisations.update');
    const sets: string[] = [];
    const bindings: unknown[] = [];
    if (changes.name !== undefined) {
      sets.push('name = ?');
      bindings.push(changes.name);
    }
    if (changes.industrySection !== undefined) {
      sets.push('industry_section = ?');
      bindings.push(changes.industrySection);
    }
    if (changes.rateLimitPerMinute !== undefined) {
      sets.push('rate_limit_per_minute = ?');
      bindings.push(changes.rateLimitPerMinute);
    }
    sets.push('updated_at = ?');
    bindings.push(changes.updatedAt.getTime(), id);
    // RETURNING: one round trip on Postgres and on SQLite >= 3.35 (better-sqlite3 12 bundles newer).
    const rows = await query(this.ctx, `UPDATE organisations SET ${sets.join(', ')} WHERE id = ? RETURNING ${ORGANISATION_COLUMNS}`, bindings);
    return rows.length === 0 ? null : organisationFromRow(rows[0]!);
  }

  async list(page: PageRequest): Promise<Organisation[]> {
    const rows =
      page.after === null
        ? await query(this.ctx, LIST_FIRST, [page.limit])
        : await query(this.ctx, LIST_AFTER, [page.after.createdAt.getTime(), page.after.id, page.limit]);
    return rows.map(organisationFromRow);
  }

  async findKeyPolicy(organisationId: string): Promise<KeyPolicy | null> {
    const row = (await query(this.ctx, KEY_POLICY, [organisationId]))[0];
    if (row === undefined) return null;
    return {
      maxLifetimeSeconds: row.max_lifetime_seconds === null || row.max_lifetime_seconds === undefined ? null : Number(row.max_lifetime_seconds),
      // Environments are stored space-joined, in the order the core gives them (live before test).
      allowedEnvironments: String(row.allowed_environments).split(' ') as KeyEnvironment[],
      exposureResponse: String(row.exposure_response) as KeyPolicy['exposureResponse'],
      expiryNoticeSeconds: Number(row.expiry_notice_seconds),
    };
  }

  async putKeyPolicy(organisationId: string, policy: KeyPolicy, at: Date): Promise<void> {
    credentialWrite(this.ctx, organisationId, 'organisations.putKeyPolicy');
    await execute(this.ctx, PUT_KEY_POLICY, [
      organisationId,
      policy.maxLifetimeSeconds,
      policy.allowedEnvironments.join(' '),
      policy.exposureResponse,
      policy.expiryNoticeSeconds,
      at.getTime(),
    ]);
  }
}
