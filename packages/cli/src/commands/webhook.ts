/** `cos-admin org webhook set|show|remove|rotate-secret`: an organisation's signed webhook endpoint (C-59). */
import type { Command } from 'commander';
import { OPERATOR, webhookView, type WebhookView } from '@cos/core';
import { emit, fields } from '../output.js';
import { runCommand } from '../runtime.js';
import { jsonWanted, withJson } from './shared.js';

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
  const webhook = org.command('webhook').description("an organisation's signed webhook endpoint: set, show, remove, rotate-secret");

  withJson(
    webhook
      .command('set')
      .description('set the endpoint (a new endpoint gets a signing secret, printed once; changing the URL keeps the secret)')
      .argument('<org_id>', 'organisation id (UUID)')
      .requiredOption('--url <url>', 'an absolute http:// or https:// URL')
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
      .description('replace the signing secret (printed once); later deliveries are signed with the new one')
      .argument('<org_id>', 'organisation id (UUID)')
      .action(async (orgId: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const { endpoint, newSecret } = await core.webhooks.rotateSecret(operator, orgId);
          const view = webhookView(endpoint, newSecret);
          emit(json, view, () => [`Signing secret rotated:`, webhookText(view), secretText(newSecret!)].join('\n'));
        });
      }),
  );
}
