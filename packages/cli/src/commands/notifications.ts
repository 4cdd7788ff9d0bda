/** `cos-admin notifications list|retry`: the webhook outbox (C-59). */
import type { Command } from 'commander';
import { listView, notificationView, NOTIFICATION_STATUSES, OPERATOR } from '@cos/core';
import { emit, orNone, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { jsonWanted, nextPageCommand, withJson } from './shared.js';

interface ListOptions {
  org?: string;
  status?: string;
  limit?: string;
  cursor?: string;
}


export function registerNotifications(program: Command): void {
  const notifications = program.command('notifications').description('the webhook outbox: list, retry');

  withJson(
    notifications
      .command('list')
      .description('list webhook notifications, oldest first')
      .option('--org <org_id>', 'only notifications of this organisation')
      .option('--status <status>', `only notifications in this state: ${NOTIFICATION_STATUSES.join(', ')}`)
      .option('--limit <n>', 'at most this many (1 to 100, default 20)')
      .option('--cursor <cursor>', 'continue after the previous page (its next_cursor)')
      .action(async (opts: ListOptions, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json }) => {
          const page = await core.notifications.list(OPERATOR, {
            ...(opts.org !== undefined ? { org: opts.org } : {}),
            ...(opts.status !== undefined ? { status: opts.status } : {}),
            ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
            ...(opts.cursor !== undefined ? { cursor: opts.cursor } : {}),
          });
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
      .argument('<id>', 'notification id (UUID)')
      .action(async (id: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const view = notificationView(await core.notifications.retry(operator, id));
          emit(json, view, () => `Notification ${view.id} (${view.type}) is due again; serve delivers it within its poll interval.`);
        });
      }),
  );
}
