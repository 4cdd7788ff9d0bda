import type { Command } from 'commander';
import { listView, NACE_SECTIONS, OPERATOR, organisationView, type Organisation } from '@cos/core';
import { emit, fields, orNone, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { fetchPaged, jsonWanted, nextPageCommand, plural, withJson, withPaging, type PagingOptions } from './shared.js';
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
export function naceHelp(): string {
  const lines = Object.entries(NACE_SECTIONS).map(([letter, title]) => `  ${letter}  ${title}`);
  return ['', 'NACE Rev. 2 sections (--section):', ...lines, '  none  remove the classification'].join('\n');
}

export function registerOrg(program: Command): void {
  const org = program.command('org').description('organisations: create, list, classify, webhook');

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
      .argument('<org_id>', 'organisation id (UUID)')
      .requiredOption('--section <section>', 'a NACE Rev. 2 section letter A..U, or none')
      .addHelpText('after', naceHelp())
      .action(async (orgId: string, opts: { section: string }, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const updated = await core.organisations.classify(operator, orgId, opts.section);
          emit(json, organisationView(updated), () => `Classified organisation:\n${organisationText(updated)}`);
        });
      }),
  );

  registerWebhook(org);
}
