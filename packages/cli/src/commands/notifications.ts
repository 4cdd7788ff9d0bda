/** `cos-admin notifications list|retry|purge`: the webhook outbox (C-59). */
import { Option, type Command } from 'commander';
import { listView, notificationView, NOTIFICATION_STATUSES, OPERATOR } from '@cos/core';
import { emit, orNone, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { DURATION_GRAMMAR, durationMs, uuid } from '../values.js';
import { fetchPaged, jsonWanted, nextPageCommand, plural, withJson, withPaging, type PagingOptions } from './shared.js';

interface ListOptions extends PagingOptions {
  org?: string;
  status?: string;
}


export function registerNotifications(program: Command): void {
  const notifications = program.command('notifications').description('the webhook outbox: list, retry, purge');

  withJson(
    withPaging(
      notifications
        .command('list')
        .description('list webhook notifications, oldest first, a page at a time (--all: every one)')
        .option('--org <org_id>', 'only notifications of this organisation', uuid)
        .addOption(new Option('--status <status>', 'only notifications in this state').choices(NOTIFICATION_STATUSES)),
      'notifications',
      'notification',
    )
      .action(async (opts: ListOptions, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json }) => {
          const page = await fetchPaged(opts, (query) =>
            core.notifications.list(OPERATOR, {
              ...(opts.org !== undefined ? { org: opts.org } : {}),
              ...(opts.status !== undefined ? { status: opts.status } : {}),
              ...query,
            }),
          );
          const view = listView(page, notificationView);
          emit(json, view, () =>
            [
              table(
                ['ID', 'CREATED', 'EVENT', 'ORGANISATION', 'STATUS', 'ATTEMPTS', 'NEXT ATTEMPT', 'LAST ERROR'],
                view.data.map((n) => [
                  n.id,
                  n.created_at,
                  n.type,
                  n.organisation_id,
                  n.status,
                  String(n.attempts),
                  orNone(n.next_attempt_at),
                  orNone(n.last_error),
                ]),
                'No notifications.',
              ),
              ...(view.meta.next_cursor !== null ? [`More notifications: ${nextPageCommand('notifications list', { org: opts.org, status: opts.status, limit: opts.limit }, view.meta.next_cursor)}`] : []),
            ].join('\n'),
          );
        });
      }),
  );

  withJson(
    notifications
      .command('retry')
      .description('make a failed notification due again now, with a fresh attempt count (serve delivers it)')
      .argument('<id>', 'notification id (UUID)', uuid)
      .action(async (id: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const view = notificationView(await core.notifications.retry(operator, id));
          emit(json, view, () => `Notification ${view.id} (${view.type}) is due again; serve delivers it within its poll interval.`);
        });
      }),
  );

  withJson(
    notifications
      .command('purge')
      .description('delete delivered and failed notifications completed longer ago than --older-than (never pending ones); serve does this on its own after NOTIFICATION_RETENTION')
      .requiredOption('--older-than <duration>', `completed at least this long ago: ${DURATION_GRAMMAR}, e.g. 30d`, durationMs())
      .action(async (opts: { olderThan: number }, cmd: Command) => {
        const olderThanMs = opts.olderThan;
        await runCommand(jsonWanted(cmd), async ({ core, json }) => {
          const { before, purged } = await core.notifications.purge(OPERATOR, olderThanMs);
          emit(json, { purged, completed_before: before.toISOString() }, () =>
            `Purged ${plural(purged, 'notification')} delivered or failed before ${before.toISOString()}.`,
          );
        });
      }),
  );
}
