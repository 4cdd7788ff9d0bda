/**
 * `cos-admin org webhook set|show|remove|rotate-secret|reencrypt-secrets`: an organisation's signed
 * webhook endpoint (C-59). Changes are audited with the operator's name (`--actor`).
 */
import { Option, type Command } from 'commander';
import { ALL_EVENTS, DEFAULT_OVERLAP_SECONDS, isoTimestamp, OPERATOR, SUBSCRIBABLE_EVENT_TYPES, webhookView, type NotFoundError, type ReencryptReport, type WebhookView } from '@cos/core';
import { CliError } from '../errors.js';
import { emit, fields } from '../output.js';
import { runCommand } from '../runtime.js';
import { DURATION_GRAMMAR, durationSeconds, uuid } from '../values.js';
import { isNotFound, jsonWanted, plural, withJson } from './shared.js';

/** The longest overlap the core allows (24 h). */
const MAX_OVERLAP_MS = 86_400_000;

const EVENTS_HELP = `\nEvents: ${SUBSCRIBABLE_EVENT_TYPES.join(', ')}, and ping (always sent); Standard Webhooks signatures (webhook-id, webhook-timestamp, webhook-signature).`;

function webhookText(v: WebhookView): string {
  return fields([
    ['organisation', v.organisation_id],
    ['url', v.url],
    ['events', v.events.length === 1 && v.events[0] === ALL_EVENTS ? 'all (*)' : v.events.join(', ')],
    ['enabled', v.enabled ? 'yes' : 'no (nothing is written to the outbox for it)'],
    ['created at', v.created_at],
    ['updated at', v.updated_at],
  ]);
}

/**
 * `--events a,b`: the names as given (trimmed; empty entries dropped), for the core to check as it
 * checks the API's `events` (`*` alone, or known event types without duplicates; an empty list is
 * kept so the core reports it).
 */
function parseEvents(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

interface SetOptions {
  url: string;
  events?: string;
  enabled?: boolean;
  disabled?: boolean;
}

function secretText(secret: string): string {
  return `Signing secret (shown once; store it now, receivers verify signatures with it):\n${secret}`;
}

export function registerWebhook(org: Command): void {
  const webhook = org
    .command('webhook')
    .description("an organisation's signed webhook endpoint: set, show, remove, rotate-secret; reencrypt-secrets for every organisation");

  withJson(
    webhook
      .command('set')
      .description(
        'set the endpoint (a new endpoint gets a signing secret, printed once; changing the URL keeps the secret); --events and --enabled/--disabled not given keep their value (a new endpoint: every event, enabled)',
      )
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .requiredOption('--url <url>', 'an https:// URL on the Internet (http:// needs WEBHOOK_ALLOW_HTTP=true; loopback, private and internal hosts WEBHOOK_ALLOW_PRIVATE=true)')
      .option('--events <events>', 'comma-separated event types sent to it, e.g. api_key.exposed,api_key.revoked; * for every event')
      .addOption(new Option('--enabled', 'send events to it').conflicts('disabled'))
      .addOption(new Option('--disabled', 'send it nothing (events are not written to the outbox for it) until --enabled').conflicts('enabled'))
      .addHelpText('after', EVENTS_HELP)
      .action(async (orgId: string, opts: SetOptions, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          // The API's PUT body, checked exactly as the API checks it.
          const { endpoint, newSecret } = await core.webhooks.put(operator, orgId, {
            url: opts.url,
            ...(opts.events !== undefined ? { events: parseEvents(opts.events) } : {}),
            ...(opts.enabled === true ? { enabled: true } : opts.disabled === true ? { enabled: false } : {}),
          });
          const view = webhookView(endpoint, newSecret);
          emit(json, view, () =>
            [`Webhook endpoint set:`, webhookText(view), newSecret !== null ? secretText(newSecret) : 'The signing secret is unchanged.'].join('\n'),
          );
        });
      }),
  );

  withJson(
    webhook
      .command('show')
      .description('show the endpoint: URL, events, enabled (never the secret)')
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .action(async (orgId: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json }) => {
          const view = webhookView(await core.webhooks.show(OPERATOR, orgId));
          emit(json, view, () => webhookText(view));
        });
      }),
  );

  withJson(
    webhook
      .command('remove')
      .description(
        'remove the endpoint (undelivered notifications then fail); with no endpoint set it changes nothing and exits 0 (says so; --json: "changed": false)',
      )
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .action(async (orgId: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          let changed = true;
          try {
            await core.webhooks.remove(operator, orgId);
          } catch (e) {
            // The organisation exists (else its own "not found") but has no endpoint: already removed.
            if (!(isNotFound(e) && (e as NotFoundError).resource === 'webhook')) throw e;
            changed = false;
          }
          emit(json, { organisation_id: orgId.toLowerCase(), removed: true, changed }, () =>
            changed ? `Webhook endpoint of ${orgId} removed.` : `Organisation ${orgId} has no webhook endpoint; nothing changed.`,
          );
        });
      }),
  );

  withJson(
    webhook
      .command('rotate-secret')
      .description(
        'replace the signing secret (printed once); during the overlap (default 24h) deliveries carry both signatures, the new one first, then only the new one',
      )
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .addOption(
        new Option('--overlap <duration>', `how long the old secret keeps signing: 0 (stop at once) or ${DURATION_GRAMMAR}, at most 24h`)
          .argParser(durationSeconds({ zero: true, max: { ms: MAX_OVERLAP_MS, text: '24h' } }))
          .default(DEFAULT_OVERLAP_SECONDS, '24h'),
      )
      .action(async (orgId: string, opts: { overlap: number }, cmd: Command) => {
        const overlapSeconds = opts.overlap;
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const { endpoint, newSecret, previousSecretExpiresAt } = await core.webhooks.rotateSecret(operator, orgId, overlapSeconds);
          const until = previousSecretExpiresAt === null ? null : isoTimestamp(previousSecretExpiresAt);
          const view = { ...webhookView(endpoint, newSecret), previous_secret_expires_at: until };
          const overlapLine = until === null ? 'The old secret no longer signs.' : `The old secret signs too (second signature) until ${until}.`;
          emit(json, view, () => [`Signing secret rotated:`, webhookText(view), secretText(newSecret!), overlapLine].join('\n'));
        });
      }),
  );

  withJson(
    webhook
      .command('reencrypt-secrets')
      .description(
        'store every signing secret encrypted under WEBHOOK_SECRET_ENCRYPTION_KEY (plaintext ones and those under a WEBHOOK_SECRET_PREVIOUS_KEYS key); without that key, decrypt them back to plaintext. Secrets themselves do not change',
      )
      .action(async (_opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json }) => {
          const report = await core.webhooks.reencryptSecrets(OPERATOR);
          emit(json, reencryptView(report), () => reencryptText(report));
          if (report.failed.length > 0) {
            // The report (stdout) says what was done; the exit status and one line on stderr say not all of it.
            throw new CliError(`${plural(report.failed.length, 'secret')} could not be decrypted and stayed as stored (see the report on stdout)`);
          }
        });
      }),
  );
}

function reencryptView(r: ReencryptReport) {
  return {
    key_id: r.keyId,
    examined: r.examined,
    reencrypted: r.reencrypted,
    unchanged: r.unchanged,
    skipped: r.skipped,
    failed: r.failed.map((f) => ({ organisation_id: f.organisationId, error: f.error })),
  };
}

function reencryptText(r: ReencryptReport): string {
  const under = r.keyId === null ? 'stored in clear (no WEBHOOK_SECRET_ENCRYPTION_KEY)' : `encrypted under key ${r.keyId}`;
  return [
    `${plural(r.examined, 'webhook endpoint')} examined: ${r.reencrypted} rewritten ${under}, ${r.unchanged} already so` +
      (r.skipped > 0 ? `, ${r.skipped} changed meanwhile (run the command again to check them)` : '') +
      '.',
    ...r.failed.map((f) => `  ${f.organisationId}: ${f.error}`),
  ].join('\n');
}
