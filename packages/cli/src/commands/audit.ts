import type { Command } from 'commander';
import { AUDIT_KINDS, auditEntryView, listView, OPERATOR, type AuditActorView, type AuditEntryView } from '@cos/core';
import { emit, orNone, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { fetchPaged, jsonWanted, nextPageCommand, withJson, withPaging, type PagingOptions } from './shared.js';

interface AuditOptions extends PagingOptions {
  org?: string;
  kind?: string;
}


function actorText(a: AuditActorView): string {
  if (a.type === 'api_key') return `api_key ${a.key_id}`;
  if (a.type === 'operator' && a.name !== undefined) return `operator ${a.name}`;
  return a.type;
}

export function registerAudit(program: Command): void {
  const audit = program.command('audit').description('the append-only audit log');

  const list = audit
    .command('list')
    .description('list audit entries, oldest first, a page at a time (--all: every one)')
    .option('--org <org_id>', 'only entries of this organisation')
    .option('--kind <kind>', `only entries of this kind: ${AUDIT_KINDS.join(', ')}`);
  withJson(
    withPaging(list, 'entries', 'entry').action(async (opts: AuditOptions, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json }) => {
          const page = await fetchPaged(opts, (query) =>
            core.audit.list(OPERATOR, {
              ...(opts.org !== undefined ? { org: opts.org } : {}),
              ...(opts.kind !== undefined ? { kind: opts.kind } : {}),
              ...query,
            }),
          );
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
                  actorText(e.actor),
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

/**
 * What some kinds add: where an exposed key was found (and how many active keys descend from it),
 * what a roll replaced the key with, how a key policy changed, which endpoint or notification.
 */
function detailOf(e: AuditEntryView): string {
  if (e.roll !== undefined) return `rolled to ${e.roll.to_key_id}, grace ${e.roll.grace_period_seconds}s`;
  if (e.exposure !== undefined) {
    const descendants = e.descendant_key_ids !== undefined && e.descendant_key_ids.length > 0 ? `; active descendants ${e.descendant_key_ids.join(', ')}` : '';
    return `exposed at ${e.exposure.url ?? '(no url)'}${descendants}`;
  }
  if (e.key_policy !== undefined) return `key policy ${JSON.stringify(e.key_policy.old)} -> ${JSON.stringify(e.key_policy.new)}`;
  if (e.member !== undefined) return `member ${e.member.email} (${e.member.id})`;
  if (e.webhook !== undefined) return `endpoint ${e.webhook.origin}`;
  if (e.notification !== undefined) return `notification ${e.notification.id} (${e.notification.type})`;
  return '-';
}
