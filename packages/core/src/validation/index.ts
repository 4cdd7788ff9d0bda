/**
 * The validation layer: every function returns or throws `ValidationError(details)` with one
 * `{field, issue}` per failing field (C-11). The `check*` functions return a Checked result so a
 * use case can report path, query and body failures together; the `validate*` ones throw.
 */
import type { NaceSection } from '../domain/organisation.js';
import { checkIssueKey, type IssueKeyInput } from './api-key.js';
import { checkUuid } from './ids.js';
import { unwrap } from './issues.js';
import { checkAddMember, type AddMemberInput } from './member.js';
import {
  checkCreateOrganisation,
  checkPatchOrganisation,
  checkReplaceOrganisation,
  checkSection,
  type CreateOrganisationInput,
  type PatchOrganisationInput,
  type ReplaceOrganisationInput,
} from './organisation.js';
import { checkAuditQuery, checkListQuery, type AuditQuery, type ListQuery } from './query.js';

export * from './issues.js';
export * from './ids.js';
export * from './organisation.js';
export * from './api-key.js';
export type { MetadataInput } from './key-attributes.js';
export * from './member.js';
export * from './query.js';

export const validateCreateOrganisation = (body: unknown): CreateOrganisationInput => unwrap(checkCreateOrganisation(body));
export const validateReplaceOrganisation = (body: unknown): ReplaceOrganisationInput => unwrap(checkReplaceOrganisation(body));
export const validatePatchOrganisation = (body: unknown): PatchOrganisationInput => unwrap(checkPatchOrganisation(body));
export const validateIssueKey = (body: unknown, now: Date): IssueKeyInput => unwrap(checkIssueKey(body, now));
export const validateAddMember = (body: unknown): AddMemberInput => unwrap(checkAddMember(body));
export const validateListQuery = (query: unknown): ListQuery => unwrap(checkListQuery(query));
export const validateAuditQuery = (query: unknown): AuditQuery => unwrap(checkAuditQuery(query));
export const validateUuid = (value: unknown, field: string): string => unwrap(checkUuid(value, field));
export const validateSection = (value: unknown): NaceSection | null => unwrap(checkSection(value));
