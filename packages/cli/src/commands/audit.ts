import { createWriteStream, readFileSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import { Option, type Command } from 'commander';
import { AUDIT_KINDS, auditEntryView, listView, OPERATOR, type AuditActorView, type AuditEntryView, type ChainReport } from '@cos/core';
import { exportLog, openCheckpoint, reportLine, signCheckpoint, verifyFile, verifyStore, type Checkpoint } from '../audit-integrity.js';
import { CliError } from '../errors.js';
import { currentIo, runPath } from '../io.js';
import { emit, orNone, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { TIMESTAMP_GRAMMAR, timestamp, uuid } from '../values.js';
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
  registerIntegrity(audit);

  const list = audit
    .command('list')
    .description('list audit entries, oldest first, a page at a time (--all: every one)')
    .option('--org <org_id>', 'only entries of this organisation', uuid)
    .addOption(new Option('--kind <kind>', 'only entries of this kind').choices(AUDIT_KINDS));
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

interface VerifyOptions {
  org?: string;
  checkpoint?: string;
  publicKey?: string;
  file?: string;
}

interface ExportOptions {
  org?: string;
  since?: Date;
  until?: Date;
  format: string;
  out?: string;
}


function readText(path: string, what: string): string {
  try {
    return readFileSync(runPath(path), 'utf8');
  } catch (e) {
    throw new CliError(`cannot read the ${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { code: 'FILE_NOT_READABLE' });
  }
}

/** Prints the reports; exit status 1 when any chain is broken. */
function reportVerification(json: boolean, reports: readonly ChainReport[], checkpoint: Checkpoint | null): void {
  const broken = reports.filter((r) => r.status === 'broken');
  emit(
    json,
    {
      status: broken.length === 0 ? 'ok' : 'broken',
      ...(checkpoint !== null ? { checkpoint: { created_at: checkpoint.created_at, organisations: checkpoint.heads.length } } : {}),
      organisations: reports,
    },
    () =>
      [
        ...reports.map(reportLine),
        broken.length === 0
          ? `${reports.length === 1 ? 'The 1 chain holds' : `All ${reports.length} chains hold`}${checkpoint !== null ? ` and ${reports.length === 1 ? 'extends' : 'extend'} the checkpoint of ${checkpoint.created_at}` : ''}.`
          : `${broken.length} of ${reports.length} chain${reports.length === 1 ? '' : 's'} broken.`,
      ].join('\n'),
  );
  if (broken.length > 0) currentIo().state.exitCode = 1;
}

function registerIntegrity(audit: Command): void {
  withJson(
    audit
      .command('verify')
      .description('recompute every organisation\'s hash chain (or one with --org, or an export with --file): exit 0 when all hold, 1 when any is broken')
      .option('--org <org_id>', 'only this organisation', uuid)
      .option('--checkpoint <file>', 'also prove the log still extends this signed checkpoint (needs --public-key)')
      .option('--public-key <file>', 'the Ed25519 public key (PEM) the checkpoint was signed for')
      .option('--file <export.jsonl>', 'verify this export file alone (no database)')
      .action(async (opts: VerifyOptions, cmd: Command) => {
        const json = jsonWanted(cmd);
        const org = opts.org;
        if ((opts.checkpoint === undefined) !== (opts.publicKey === undefined)) {
          throw new CliError('--checkpoint and --public-key go together', { usage: true });
        }
        const checkpoint = opts.checkpoint !== undefined ? openCheckpoint(readText(opts.checkpoint, 'checkpoint'), readText(opts.publicKey!, 'public key')) : null;
        if (opts.file !== undefined) {
          if (org !== undefined) throw new CliError('--org and --file do not go together', { usage: true });
          reportVerification(json, await verifyFile(runPath(opts.file), { checkpoint }), checkpoint);
          return;
        }
        await runCommand(json, async ({ store }) => {
          reportVerification(json, await verifyStore(store.stores.audit, { ...(org !== undefined ? { org } : {}), checkpoint }), checkpoint);
        });
      }),
  );

  withJson(
    audit
      .command('checkpoint')
      .description('sign every organisation\'s chain head (seq, hash) with an Ed25519 key and write the checkpoint; keep it off this server')
      .requiredOption('--key <private.pem>', 'the Ed25519 private key (PEM)')
      .requiredOption('--out <file>', 'where to write the checkpoint (JSON)')
      .action(async (opts: { key: string; out: string }, cmd: Command) => {
        const json = jsonWanted(cmd);
        const pem = readText(opts.key, 'private key');
        await runCommand(json, async ({ store, core }) => {
          const checkpoint = signCheckpoint(await store.stores.audit.heads(), core.clock.now(), pem);
          try {
            writeFileSync(runPath(opts.out), `${JSON.stringify(checkpoint, null, 2)}\n`, { flag: 'wx' });
          } catch (e) {
            throw new CliError(`cannot write the checkpoint to ${opts.out}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { code: 'FILE_NOT_WRITABLE' });
          }
          emit(json, { out: opts.out, created_at: checkpoint.created_at, organisations: checkpoint.heads.length }, () =>
            `Checkpoint of ${checkpoint.heads.length} organisation chain${checkpoint.heads.length === 1 ? '' : 's'} at ${checkpoint.created_at} written to ${opts.out}.`,
          );
        });
      }),
  );

  withJson(
    audit
      .command('export')
      .description('write the audit log as JSON Lines (one entry per line with seq, prev_hash and hash), organisation by organisation in chain order')
      .option('--org <org_id>', 'only this organisation', uuid)
      .option('--since <time>', `from each organisation's first entry at or after this time: ${TIMESTAMP_GRAMMAR}`, timestamp)
      .option('--until <time>', `up to each organisation's first entry at or after this time (excluded): ${TIMESTAMP_GRAMMAR}`, timestamp)
      .addOption(new Option('--format <format>', 'output format').choices(['jsonl']).makeOptionMandatory())
      .option('--out <file>', 'write to this file (never over an existing one) instead of stdout'),
  ).action(async (opts: ExportOptions, cmd: Command) => {
    const json = jsonWanted(cmd);
    const { org, since, until } = opts;
    await runCommand(json, async ({ store }) => {
      const options = { ...(org !== undefined ? { org } : {}), ...(since !== undefined ? { since } : {}), ...(until !== undefined ? { until } : {}) };
      if (opts.out === undefined) {
        await exportLog(store.stores.audit, currentIo().stdout, options);
        return;
      }
      const out = createWriteStream(runPath(opts.out), { flags: 'wx' });
      try {
        await once(out, 'open');
      } catch (e) {
        throw new CliError(`cannot write the export to ${opts.out}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { code: 'FILE_NOT_WRITABLE' });
      }
      const entries = await exportLog(store.stores.audit, out, options);
      out.end();
      await finished(out);
      emit(json, { out: opts.out, entries }, () => `Exported ${entries} audit entr${entries === 1 ? 'y' : 'ies'} to ${opts.out}.`);
    });
  });
}

/**
 * What some kinds add: where an exposed key was found (and how many active keys descend from it),
 * what a roll replaced the key with, how a key policy or a rate limit changed, which endpoint or notification.
 */
function detailOf(e: AuditEntryView): string {
  if (e.roll !== undefined) return `rolled to ${e.roll.to_key_id}, grace ${e.roll.grace_period_seconds}s`;
  if (e.exposure !== undefined) {
    const descendants = e.descendant_key_ids !== undefined && e.descendant_key_ids.length > 0 ? `; active descendants ${e.descendant_key_ids.join(', ')}` : '';
    return `exposed at ${e.exposure.url ?? '(no url)'}${descendants}`;
  }
  if (e.key_policy !== undefined) return `key policy ${JSON.stringify(e.key_policy.old)} -> ${JSON.stringify(e.key_policy.new)}`;
  if (e.rate_limit !== undefined) return `rate limit ${limitText(e.rate_limit.old)} -> ${limitText(e.rate_limit.new)}`;
  if (e.member !== undefined) return `member ${e.member.id}`;
  if (e.webhook !== undefined) return `endpoint ${e.webhook.origin}`;
  if (e.notification !== undefined) return `notification ${e.notification.id} (${e.notification.type})`;
  return '-';
}

/** An organisation's own limit, or the default when it has none. */
function limitText(perMinute: number | null): string {
  return perMinute === null ? 'default' : `${perMinute}/min`;
}
