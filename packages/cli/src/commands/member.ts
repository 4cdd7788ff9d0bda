import type { Command } from 'commander';
import { auditEntryView, listView, memberView, OPERATOR, type Core } from '@cos/core';
import { emit, fields, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { uuid } from '../values.js';
import { collectAll, fetchPaged, isNotFound, jsonWanted, nextPageCommand, plural, withJson, withPaging, type PagingOptions } from './shared.js';

export function registerMember(program: Command): void {
  const member = program.command('member').description('members of an organisation: add, remove, list');

  withJson(
    member
      .command('add')
      .description('add a member to an organisation')
      .argument('<org_id>', 'organisation id (UUID)', uuid)
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
      .description(
        'remove a member from an organisation; removing a member already removed changes nothing and exits 0 (says so; --json: "changed": false)',
      )
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .argument('<member_id>', 'member id (UUID)', uuid)
      .action(async (orgId: string, memberId: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          let changed = true;
          try {
            await core.members.remove(operator, orgId, memberId);
          } catch (e) {
            if (!isNotFound(e)) throw e;
            // Not there: the organisation itself may be missing (its own "not found"), or the member
            // was removed before (nothing to do), or it never was a member (not found).
            await core.organisations.get(OPERATOR, orgId);
            if (!(await wasRemoved(core, orgId, memberId))) throw e;
            changed = false;
          }
          emit(json, { id: memberId, organisation_id: orgId, removed: true, changed }, () =>
            changed
              ? `Removed member ${memberId} from organisation ${orgId}.`
              : `Member ${memberId} was already removed from organisation ${orgId}; nothing changed.`,
          );
        });
      }),
  );

  withJson(
    withPaging(
      member
        .command('list')
        .description('list the members of an organisation, oldest first, a page at a time (--all: every one)')
        .argument('<org_id>', 'organisation id (UUID)', uuid),
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

/** Whether the organisation's audit log records the removal of that member (member ids are never reused). */
async function wasRemoved(core: Core, orgId: string, memberId: string): Promise<boolean> {
  const entries = await collectAll((cursor) =>
    core.audit.list(OPERATOR, { org: orgId, kind: 'member_removed', limit: '100', ...(cursor !== undefined ? { cursor } : {}) }),
  );
  return entries.some((e) => auditEntryView(e).member?.id === memberId.toLowerCase());
}
