import type { Organisation } from '../domain/organisation.js';
import type { Principal } from '../domain/principal.js';
import type { CoreDeps } from './deps.js';
import type { Page } from './page.js';

export interface CreateOrganisationOptions {
  /** Only the operator may create a system (platform) organisation: `org create --system`, bootstrap. */
  readonly isSystem?: boolean;
}

/**
 * Organisation operations. Every method checks in the order of C-33 (the caller has already been
 * authenticated and rate limited): authorise (403) -> validate (400) -> act (404/409).
 * Inputs are raw (`unknown` bodies, string path params, raw query objects) and are validated here.
 */
export class Organisations {
  constructor(private readonly deps: CoreDeps) {}

  /** GET /organisations: platform key or operator only; query {limit, cursor} (C-5, C-6). */
  list(principal: Principal, query: Readonly<Record<string, unknown>>): Promise<Page<Organisation>> {
    throw new Error('TODO: implement');
  }

  /** POST /organisations: platform key or operator; body {name, slug} strict (C-11..C-13); audit organisation_created. */
  create(principal: Principal, body: unknown, options?: CreateOrganisationOptions): Promise<Organisation> {
    throw new Error('TODO: implement');
  }

  /** GET /organisations/{org_id}. */
  get(principal: Principal, orgId: string): Promise<Organisation> {
    throw new Error('TODO: implement');
  }

  /** PUT: body {name} required, strict (C-12, C-14); audit organisation_updated. */
  replace(principal: Principal, orgId: string, body: unknown): Promise<Organisation> {
    throw new Error('TODO: implement');
  }

  /** PATCH: body {name?} strict; `{}` changes nothing and returns the record (C-14). */
  patch(principal: Principal, orgId: string, body: unknown): Promise<Organisation> {
    throw new Error('TODO: implement');
  }

  /** Operator only (CLI `org classify`): section 'A'..'U' or 'none' (C-24); audit organisation_updated. */
  classify(principal: Principal, orgId: string, section: string): Promise<Organisation> {
    throw new Error('TODO: implement');
  }
}
