/**
 * `cos-admin org webhook set|show|remove|rotate-secret|reencrypt-secrets`: an organisation's signed
 * webhook endpoint (C-59). Changes are audited with the operator's name (`--actor`).
 */
import type { Command } from 'commander';
import { isoTimestamp, OPERATOR, webhookView, type ReencryptReport, type WebhookView } from '@cos/core';
import { parseGrace } from './key.js';
import { CliError } from '../errors.js';
import { emit, fields } from '../output.js';
import { runCommand } from '../runtime.js';
import { jsonWanted, plural, withJson } from './shared.js';

const EVENTS_HELP = '\nEvents: api_key.issued, api_key.revoked, api_key.exposed (Standard Webhooks signatures: webhook-id, webhook-timestamp, webhook-signature).';

function webhookText(v: WebhookView): string {
  return fields([
    ['organisation', v.organisation_id],
    ['url', v.url],
    ['created at', v.created_at],
    ['updated at', v.updated_at],
  ]);
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
      .description('set the endpoint (a new endpoint gets a signing secret, printed once; changing the URL keeps the secret)')
      .argument('<org_id>', 'organisation id (UUID)')
      .requiredOption('--url <url>', 'an https:// URL on the Internet (http:// needs WEBHOOK_ALLOW_HTTP=true; loopback, private and internal hosts WEBHOOK_ALLOW_PRIVATE=true)')
      .addHelpText('after', EVENTS_HELP)
      .action(async (orgId: string, opts: { url: string }, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const { endpoint, newSecret } = await core.webhooks.set(operator, orgId, opts.url);
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
      .description('show the endpoint (never the secret)')
      .argument('<org_id>', 'organisation id (UUID)')
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
      .description('remove the endpoint (undelivered notifications then fail)')
      .argument('<org_id>', 'organisation id (UUID)')
      .action(async (orgId: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          await core.webhooks.remove(operator, orgId);
          emit(json, { organisation_id: orgId.toLowerCase(), removed: true }, () => `Webhook endpoint of ${orgId} removed.`);
        });
      }),
  );

  withJson(
    webhook
      .command('rotate-secret')
      .description(
        'replace the signing secret (printed once); during the overlap (default 24h) deliveries carry both signatures, the new one first, then only the new one',
      )
      .argument('<org_id>', 'organisation id (UUID)')
      .option('--overlap <duration>', 'how long the old secret keeps signing: 0 (stop at once) or e.g. 24h, 90m, 3600s; at most 24h', '24h')
      .action(async (orgId: string, opts: { overlap: string }, cmd: Command) => {
        const overlapSeconds = parseGrace(opts.overlap, '--overlap');
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
