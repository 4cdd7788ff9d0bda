import { organisationNotFound } from '../domain/errors.js';
import type { Organisation } from '../domain/organisation.js';
import type { OrganisationStore } from '../ports/organisation-store.js';

/**
 * The organisation `id` as the store has it, or 404 "Organisation not found": the first step of
 * every operation on an organisation's resources, inside or outside a unit of work.
 */
export async function requireOrganisation(organisations: Pick<OrganisationStore, 'findById'>, id: string): Promise<Organisation> {
  const organisation = await organisations.findById(id);
  if (organisation === null) throw organisationNotFound();
  return organisation;
}
