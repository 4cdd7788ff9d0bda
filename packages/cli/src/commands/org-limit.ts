/**
 * `cos-admin org limit show|set`: an organisation's own rate limit, its plan. `set` is the
 * operator's way to what a platform key does with PUT …/rate-limit: the change is audited
 * (`organisation_rate_limit_changed`) and, being a change of the organisation record, reaches every
 * serving instance on its next request through the credential fence.
 */
import type { Command } from 'commander';
import { rateLimitView, type OrganisationRateLimit } from '@cos/core';
import { emit, fields } from '../output.js';
import { runCommand } from '../runtime.js';
import { perMinute, uuid } from '../values.js';
import { jsonWanted, withJson } from './shared.js';

function limitText(orgId: string, r: OrganisationRateLimit): string {
  return fields([
    ['organisation', orgId],
    ['requests per minute', String(r.requestsPerMinute)],
    ['source', r.source === 'organisation' ? "the organisation's own limit" : 'the default (RATE_LIMIT_PER_MINUTE)'],
  ]);
}

export function registerLimit(org: Command): void {
  const limit = org.command('limit').description("an organisation's own rate limit (its plan): requests per UTC minute");

  withJson(
    limit
      .command('show')
      .description("show the limit an organisation's requests are counted against: its own, or the default")
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .action(async (orgId: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const current = await core.rateLimits.get(operator, orgId);
          emit(json, rateLimitView(current), () => `Rate limit:\n${limitText(orgId, current)}`);
        });
      }),
  );

  withJson(
    limit
      .command('set')
      .description("set an organisation's own rate limit, or return it to the default; applies from its next request at every instance")
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .requiredOption('--per-minute <n>', 'requests per UTC minute, a whole number from 1 to 1000000; or default (RATE_LIMIT_PER_MINUTE)', perMinute)
      .action(async (orgId: string, opts: { perMinute: { readonly perMinute: number | null } }, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const changed = await core.rateLimits.replace(operator, orgId, { requests_per_minute: opts.perMinute.perMinute });
          emit(json, rateLimitView(changed), () => `Changed rate limit:\n${limitText(orgId, changed)}`);
        });
      }),
  );
}
