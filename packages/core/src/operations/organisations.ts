import type { AuditActor } from '../domain/audit.js';
import { organisationNotFound } from '../domain/errors.js';
import type { NaceSection, Organisation } from '../domain/organisation.js';
import type { Principal } from '../domain/principal.js';
import type { OuterStores } from '../ports/unit-of-work.js';
import { checkUuid } from '../validation/ids.js';
import { all, unwrap } from '../validation/issues.js';
import {
  checkCreateOrganisation,
  checkPatchOrganisation,
  checkReplaceOrganisation,
  checkSection,
  type CreateOrganisationInput,
} from '../validation/organisation.js';
import { checkListQuery } from '../validation/query.js';
import { auditEntry } from './audit-entry.js';
import { actorOf, authorise } from '../access/authorise.js';
import type { CoreDeps } from '../deps.js';
import type { Page } from './page.js';
import { paginate } from './paginate.js';
import { requireOrganisation } from './require-organisation.js';

export interface CreateOrganisationOptions {
  /** Only the operator may create a system (platform) organisation: `org create --system`, bootstrap. */
  readonly isSystem?: boolean;
}

/**
 * Inserts an organisation and its `organisation_created` entry through `stores` (call it inside a
 * unit of work, C-41). A duplicate slug surfaces as the store's ConflictError (C-13).
 */
export async function createOrganisationIn(
  stores: OuterStores,
  deps: Pick<CoreDeps, 'random'>,
  input: CreateOrganisationInput,
  isSystem: boolean,
  actor: AuditActor,
  now: Date,
): Promise<Organisation> {
  const organisation: Organisation = {
    id: deps.random.uuid(),
    name: input.name,
    slug: input.slug,
    industrySection: null,
    isSystem,
    rateLimitPerMinute: null,
    createdAt: now,
    updatedAt: now,
  };
  await stores.organisations.create(organisation);
  await stores.audit.append(auditEntry(deps.random, 'organisation_created', now, actor, organisation.id));
  return organisation;
}

export interface GetOrganisationOptions {
  /**
   * The caller's own organisation as its authentication read it in this same request
   * (`Admitted.organisation`). When it is the organisation asked for, it is the answer and the store
   * is not read again: read with the key during this request, it is what a store read would have
   * answered at that instant. Anything else (another organisation, another caller's record) is
   * ignored and the store is read.
   */
  readonly authenticatedOrganisation?: Organisation;
}

type Changes = { readonly name?: string; readonly industrySection?: NaceSection | null };

/**
 * Organisation operations. Every method checks in the order of C-33 (the caller has already been
 * authenticated and rate limited): authorise (403) -> validate (400) -> act (404/409).
 * Inputs are raw (`unknown` bodies, string path params, raw query objects) and are validated here.
 */
export class Organisations {
  constructor(private readonly deps: CoreDeps) {}

  /** GET /organisations: platform key or operator only; query {limit, cursor} (C-5, C-6). */
  async list(principal: Principal, query: Readonly<Record<string, unknown>>): Promise<Page<Organisation>> {
    authorise(principal, 'organisations.list');
    const q = unwrap(checkListQuery(query));
    return paginate(q, (page) => this.deps.stores.organisations.list(page), (o) => o);
  }

  /** POST /organisations: platform key or operator; body {name, slug} strict (C-11..C-13); audit organisation_created. */
  async create(principal: Principal, body: unknown, options?: CreateOrganisationOptions): Promise<Organisation> {
    const isSystem = options?.isSystem === true;
    authorise(principal, isSystem ? 'organisations.create_system' : 'organisations.create');
    const input = unwrap(checkCreateOrganisation(body));
    const now = this.deps.clock.now();
    return this.deps.unitOfWork.run((stores) =>
      createOrganisationIn(stores, this.deps, input, isSystem, actorOf(principal), now),
    );
  }

  /**
   * GET /organisations/{org_id}. The record comes from `options.authenticatedOrganisation` when that
   * is the caller's own organisation asked for (read with the key in this request), else from the
   * store (which may cache behind its port: store-sql on SQLite files).
   */
  async get(principal: Principal, orgId: string, options?: GetOrganisationOptions): Promise<Organisation> {
    authorise(principal, 'organisations.get', orgId);
    const [id] = all(checkUuid(orgId, 'org_id'));
    const known = options?.authenticatedOrganisation;
    if (known !== undefined && known.id === id && principal.kind === 'api_key' && principal.organisationId === id) return known;
    return this.find(id);
  }

  /** PUT: body {name} required, strict (C-12, C-14); audit organisation_updated. */
  async replace(principal: Principal, orgId: string, body: unknown): Promise<Organisation> {
    authorise(principal, 'organisations.replace', orgId);
    const [id, input] = all(checkUuid(orgId, 'org_id'), checkReplaceOrganisation(body));
    return this.apply(principal, id, { name: input.name });
  }

  /** PATCH: body {name?} strict; `{}` changes nothing and returns the record (C-14). */
  async patch(principal: Principal, orgId: string, body: unknown): Promise<Organisation> {
    authorise(principal, 'organisations.patch', orgId);
    const [id, input] = all(checkUuid(orgId, 'org_id'), checkPatchOrganisation(body));
    return this.apply(principal, id, input.name === undefined ? {} : { name: input.name });
  }

  /** Operator only (CLI `org classify`): section 'A'..'U' or 'none' (C-24); audit organisation_updated. */
  async classify(principal: Principal, orgId: string, section: string): Promise<Organisation> {
    authorise(principal, 'organisations.classify');
    const [id, industrySection] = all(checkUuid(orgId, 'org_id'), checkSection(section));
    return this.apply(principal, id, { industrySection });
  }

  /**
   * Applies the requested changes in one unit of work with their organisation_updated entry.
   * Changes that equal the current values are dropped; when nothing is left the record is
   * returned unchanged and nothing is written (C-14).
   */
  private async apply(principal: Principal, id: string, requested: Changes): Promise<Organisation> {
    if (Object.keys(requested).length === 0) return this.find(id);
    return this.deps.unitOfWork.changeCredentials([id], async (stores) => {
      const current = await requireOrganisation(stores.organisations, id);
      const changes: { name?: string; industrySection?: NaceSection | null } = {};
      if (requested.name !== undefined && requested.name !== current.name) changes.name = requested.name;
      if (requested.industrySection !== undefined && requested.industrySection !== current.industrySection) {
        changes.industrySection = requested.industrySection;
      }
      if (Object.keys(changes).length === 0) return current;
      const now = this.deps.clock.now();
      const updated = await stores.organisations.update(id, { ...changes, updatedAt: now });
      if (updated === null) throw organisationNotFound();
      await stores.audit.append(auditEntry(this.deps.random, 'organisation_updated', now, actorOf(principal), id));
      return updated;
    });
  }

  private find(id: string): Promise<Organisation> {
    return requireOrganisation(this.deps.stores.organisations, id);
  }
}
