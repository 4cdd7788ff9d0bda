import type { Command } from 'commander';
import { listView, memberView, OPERATOR } from '@cos/core';
import { emit, fields, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { fetchPaged, jsonWanted, nextPageCommand, plural, withJson, withPaging, type PagingOptions } from './shared.js';

export function registerMember(program: Command): void {
  const member = program.command('member').description('members of an organisation: add, remove, list');

  withJson(
    member
      .command('add')
      .description('add a member to an organisation')
      .argument('<org_id>', 'organisation id (UUID)')
      .requiredOption('--email <email>', 'e-mail address of the member')
      .action(async (orgId: string, opts: { email: string }, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const m = await core.members.add(operator, orgId, { email: opts.email });
          emit(json, memberView(m), () =>
            `Added member:\n${fields([
              ['id', m.id],
              ['organisation', m.organisationId],
              ['e-mail', m.email],
              ['created at', m.createdAt.toISOString()],
            ])}`,
          );
        });
      }),
  );

  withJson(
    member
      .command('remove')
      .description('remove a member from an organisation')
      .argument('<org_id>', 'organisation id (UUID)')
      .argument('<member_id>', 'member id')
      .action(async (orgId: string, memberId: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          await core.members.remove(operator, orgId, memberId);
          emit(json, { id: memberId, organisation_id: orgId, removed: true }, () =>
            `Removed member ${memberId} from organisation ${orgId}.`,
          );
        });
      }),
  );

  withJson(
    withPaging(
      member
        .command('list')
        .description('list the members of an organisation, oldest first, a page at a time (--all: every one)')
        .argument('<org_id>', 'organisation id (UUID)'),
      'members',
      'member',
    ).action(async (orgId: string, opts: PagingOptions, cmd: Command) => {
      await runCommand(jsonWanted(cmd), async ({ core, json }) => {
        const page = await fetchPaged(opts, (query) => core.members.list(OPERATOR, orgId, query));
        const all = page.items;
        emit(json, listView(page, memberView), () =>
          [
            table(
              ['ID', 'E-MAIL', 'CREATED'],
              all.map((m) => [m.id, m.email, m.createdAt.toISOString()]),
              'No members.',
            ),
            ...(all.length > 0 && page.nextCursor === null ? [`(${plural(all.length, 'member')})`] : []),
            ...(page.nextCursor !== null ? [`More members: ${nextPageCommand(`member list ${orgId}`, { limit: opts.limit }, page.nextCursor)}`] : []),
          ].join('\n'),
        );
      });
    }),
  );
}
