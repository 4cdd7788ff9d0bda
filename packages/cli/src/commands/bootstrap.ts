import type { Command } from 'commander';
import { issuedKeyView, organisationView, type BootstrapResult, type Core } from '@cos/core';
import { emit } from '../output.js';
import { runCommand } from '../runtime.js';
import { jsonWanted, withJson } from './shared.js';

export const STORE_KEY_NOW = 'Store this key now: it is shown only once and cannot be retrieved again.';

/** The JSON form of a bootstrap result. */
export function bootstrapView(result: BootstrapResult, core: Core): unknown {
  return result.created
    ? { created: true, organisation: organisationView(result.organisation), key: issuedKeyView(result.issued, core.clock.now()) }
    : { created: false, organisation: organisationView(result.organisation) };
}

/** The human form of a bootstrap result (the key, when one was issued, appears exactly once). */
export function bootstrapText(result: BootstrapResult): string {
  const org = result.organisation;
  if (!result.created) {
    return [
      `A system organisation already exists: "${org.name}" (slug ${org.slug}, id ${org.id}). No key was issued.`,
      `To issue another platform key: cos-admin key issue ${org.id} --label <label>`,
    ].join('\n');
  }
  return [
    `Created the system organisation "${org.name}" (slug ${org.slug}, id ${org.id}) and issued a platform key:`,
    '',
    `  ${result.issued.rawKey}`,
    '',
    STORE_KEY_NOW,
  ].join('\n');
}

export function registerBootstrap(program: Command): void {
  withJson(
    program
      .command('bootstrap')
      .description(
        'if no system organisation exists: create it, issue a platform key and print it once; otherwise say so and exit 0',
      )
      .option('--name <name>', 'name of the system organisation (default "Platform")')
      .option('--slug <slug>', 'slug of the system organisation (default "platform")')
      .action(async (opts: { name?: string; slug?: string }, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const result = await core.bootstrap.run({
            operator,
            ...(opts.name !== undefined ? { name: opts.name } : {}),
            ...(opts.slug !== undefined ? { slug: opts.slug } : {}),
          });
          emit(json, bootstrapView(result, core), () => bootstrapText(result));
        }, { mayCreateDatabase: true });
      }),
  );
}
