import { Option, type Command } from 'commander';
import { keyPolicyView, lifetimeText, listView, MAX_EXPIRY_NOTICE_SECONDS, MAX_POLICY_LIFETIME_SECONDS, MIN_POLICY_LIFETIME_SECONDS, NACE_SECTIONS, OPERATOR, organisationView, type KeyPolicy, type Organisation } from '@cos/core';
import { CliError } from '../errors.js';
import { emit, fields, orNone, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { DURATION_GRAMMAR, durationSeconds, listOf, naceSection, parseDuration, uuid } from '../values.js';
import { fetchPaged, jsonWanted, nextPageCommand, plural, withJson, withPaging, type PagingOptions } from './shared.js';
import { registerLimit } from './org-limit.js';
import { registerWebhook } from './webhook.js';

function organisationText(o: Organisation): string {
  return fields([
    ['id', o.id],
    ['name', o.name],
    ['slug', o.slug],
    ['industry section', o.industrySection === null ? 'none' : `${o.industrySection} (${NACE_SECTIONS[o.industrySection]})`],
    ['system', o.isSystem ? 'yes' : 'no'],
    ['created at', o.createdAt.toISOString()],
    ['updated at', o.updatedAt.toISOString()],
  ]);
}

/** The sections and their names, for `org classify --help`. */
function naceHelp(): string {
  const lines = Object.entries(NACE_SECTIONS).map(([letter, title]) => `  ${letter}  ${title}`);
  return ['', 'NACE Rev. 2 sections (--section):', ...lines, '  none  remove the classification'].join('\n');
}

export function registerOrg(program: Command): void {
  const org = program.command('org').description('organisations: create, list, classify, webhook, key policy, rate limit');

  withJson(
    org
      .command('create')
      .description('create an organisation')
      .requiredOption('--name <name>', 'display name (1 to 200 characters)')
      .requiredOption('--slug <slug>', 'immutable slug: 1 to 63 of a-z, 0-9 and -, not starting or ending with -')
      .option('--system', 'a system (platform) organisation: its keys are platform keys')
      .action(async (opts: { name: string; slug: string; system?: boolean }, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const created = await core.organisations.create(
            operator,
            { name: opts.name, slug: opts.slug },
            { isSystem: opts.system === true },
          );
          emit(json, organisationView(created), () => `Created ${created.isSystem ? 'system ' : ''}organisation:\n${organisationText(created)}`);
        });
      }),
  );

  withJson(
    withPaging(org.command('list').description('list organisations, oldest first, a page at a time (--all: every one)'), 'organisations', 'organisation')
      .action(async (opts: PagingOptions, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json }) => {
          const page = await fetchPaged(opts, (query) => core.organisations.list(OPERATOR, query));
          const all = page.items;
          emit(json, listView(page, organisationView), () =>
            [
              table(
                ['ID', 'SLUG', 'NAME', 'SECTION', 'SYSTEM', 'CREATED'],
                all.map((o) => [o.id, o.slug, o.name, orNone(o.industrySection), o.isSystem ? 'yes' : 'no', o.createdAt.toISOString()]),
                'No organisations yet (cos-admin bootstrap creates the system organisation).',
              ),
              ...(all.length > 0 && page.nextCursor === null ? [`(${plural(all.length, 'organisation')})`] : []),
              ...(page.nextCursor !== null ? [`More organisations: ${nextPageCommand('org list', { limit: opts.limit }, page.nextCursor)}`] : []),
            ].join('\n'),
          );
        });
      }),
  );

  withJson(
    org
      .command('classify')
      .description('set the NACE Rev. 2 industry section of an organisation (A to U), or none')
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .requiredOption('--section <section>', 'a NACE Rev. 2 section letter A..U, or none', naceSection)
      .addHelpText('after', naceHelp())
      .action(async (orgId: string, opts: { section: string }, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const updated = await core.organisations.classify(operator, orgId, opts.section);
          emit(json, organisationView(updated), () => `Classified organisation:\n${organisationText(updated)}`);
        });
      }),
  );

  registerWebhook(org);
  registerPolicy(org);
  registerLimit(org);
}

function policyText(orgId: string, p: KeyPolicy): string {
  return fields([
    ['organisation', orgId],
    ['max lifetime', p.maxLifetimeSeconds === null ? 'none' : `${p.maxLifetimeSeconds} s (${lifetimeText(p.maxLifetimeSeconds)})`],
    ['environments', p.allowedEnvironments.join(', ')],
    ['exposure response', p.exposureResponse],
    ['expiry notice', p.expiryNoticeSeconds === 0 ? 'off' : `${p.expiryNoticeSeconds} s (${lifetimeText(p.expiryNoticeSeconds)}) before a key expires`],
  ]);
}

interface PolicySetOptions {
  maxLifetime?: { readonly seconds: number | null };
  environments?: string[];
  exposureResponse?: string;
  expiryNotice?: number;
}

/**
 * `--max-lifetime`: `none`, or a duration from 1h to 730d (104w2d) -> seconds (null: none). Wrapped,
 * as commander takes a parser's null for "no value".
 */
function parseMaxLifetime(text: string): { readonly seconds: number | null } {
  if (text.trim() === 'none') return { seconds: null };
  const rule = {
    min: { ms: MIN_POLICY_LIFETIME_SECONDS * 1000, text: '1h' },
    max: { ms: MAX_POLICY_LIFETIME_SECONDS * 1000, text: '730d' },
  };
  return { seconds: parseDuration(text, rule) / 1000 };
}

function registerPolicy(org: Command): void {
  const policy = org
    .command('policy')
    .description("an organisation's key policy: maximum key lifetime, allowed environments, exposure response, expiry notice");

  withJson(
    policy
      .command('show')
      .description("show an organisation's key policy (the default when it never set one)")
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .action(async (orgId: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const current = await core.keyPolicies.get(operator, orgId);
          emit(json, keyPolicyView(current), () => `Key policy:\n${policyText(orgId, current)}`);
        });
      }),
  );

  withJson(
    policy
      .command('set')
      .description('change an organisation\'s key policy; options not given keep their value. Applies to keys issued or rolled from now on (and to exposures); existing keys are not changed')
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .option('--max-lifetime <duration>', `longest life of a new key: ${DURATION_GRAMMAR}, from 1h to 730d; or none`, parseMaxLifetime)
      .option('--environments <list>', 'comma-separated environments keys may be issued in: live, test or live,test', listOf(['live', 'test']))
      .addOption(
        new Option('--exposure-response <response>', 'what a secret-scanning exposure revokes').choices(['revoke_key', 'revoke_key_and_descendants']),
      )
      .option(
        '--expiry-notice <duration>',
        `how long before a key expires its api_key.expiring webhook is sent: 0 (none) or ${DURATION_GRAMMAR}, at most 90d`,
        durationSeconds({ zero: true, max: { ms: MAX_EXPIRY_NOTICE_SECONDS * 1000, text: '90d' } }),
      )
      .action(async (orgId: string, opts: PolicySetOptions, cmd: Command) => {
        if (opts.maxLifetime === undefined && opts.environments === undefined && opts.exposureResponse === undefined && opts.expiryNotice === undefined) {
          throw new CliError('nothing to change: give --max-lifetime, --environments, --exposure-response or --expiry-notice', { usage: true });
        }
        const maxLifetime = opts.maxLifetime?.seconds;
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const current = keyPolicyView(await core.keyPolicies.get(operator, orgId));
          const changed = await core.keyPolicies.replace(operator, orgId, {
            max_lifetime_seconds: maxLifetime !== undefined ? maxLifetime : current.max_lifetime_seconds,
            allowed_environments:
              opts.environments ?? current.allowed_environments,
            exposure_response: opts.exposureResponse ?? current.exposure_response,
            expiry_notice_seconds: opts.expiryNotice ?? current.expiry_notice_seconds,
          });
          emit(json, keyPolicyView(changed), () => `Changed key policy:\n${policyText(orgId, changed)}`);
        });
      }),
  );
}
