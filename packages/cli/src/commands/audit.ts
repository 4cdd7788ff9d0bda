import type { Command } from 'commander';
import { AUDIT_KINDS, auditEntryView, listView, OPERATOR, type AuditEntryView } from '@cos/core';
import { emit, orNone, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { jsonWanted, nextPageCommand, withJson } from './shared.js';

interface AuditOptions {
  org?: string;
  kind?: string;
  limit?: string;
  cursor?: string;
}


export function registerAudit(program: Command): void {
  const audit = program.command('audit').description('the append-only audit log');

  withJson(
    audit
      .command('list')
      .description('list audit entries, oldest first')
      .option('--org <org_id>', 'only entries of this organisation')
      .option('--kind <kind>', `only entries of this kind: ${AUDIT_KINDS.join(', ')}`)
      .option('--limit <n>', 'at most this many entries (1 to 100, default 20)')
      .option('--cursor <cursor>', 'continue after the previous page (its next_cursor)')
      .action(async (opts: AuditOptions, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json }) => {
          const page = await core.audit.list(OPERATOR, {
            ...(opts.org !== undefined ? { org: opts.org } : {}),
            ...(opts.kind !== undefined ? { kind: opts.kind } : {}),
            ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
            ...(opts.cursor !== undefined ? { cursor: opts.cursor } : {}),
          });
          const view = listView(page, auditEntryView);
          emit(json, view, () =>
            [
              table(
                ['OCCURRED', 'KIND', 'ORGANISATION', 'KEY PREFIX', 'ACTOR', 'DETAIL'],
                view.data.map((e) => [
                  e.occurred_at,
                  e.kind,
                  e.organisation_id,
                  orNone(e.key_prefix),
                  e.actor.type === 'api_key' ? `api_key ${e.actor.key_id}` : e.actor.type,
                  detailOf(e),
                ]),
                'No audit entries.',
              ),
              ...(view.meta.next_cursor !== null ? [`More entries: ${nextPageCommand('audit list', { org: opts.org, kind: opts.kind, limit: opts.limit }, view.meta.next_cursor)}`] : []),
            ].join('\n'),
          );
        });
      }),
  );
}

/** What some kinds add: where an exposed key was found, what a roll replaced the key with. */
function detailOf(e: AuditEntryView): string {
  if (e.roll !== undefined) return `rolled to ${e.roll.to_key_id}, grace ${e.roll.grace_period_seconds}s`;
  if (e.exposure !== undefined) return `exposed at ${e.exposure.url ?? '(no url)'}`;
  return '-';
}
