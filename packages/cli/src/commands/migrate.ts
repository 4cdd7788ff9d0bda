import type { Command } from 'commander';
import { emit } from '../output.js';
import { refuseBreaking, runCommand } from '../runtime.js';
import { jsonWanted, plural, withJson } from './shared.js';

export function registerMigrate(program: Command): void {
  withJson(
    program
      .command('migrate')
      .description('apply pending migrations (expand-only ones; one that is not, only with --allow-breaking)')
      .option('--allow-breaking', 'also apply a migration that is not expand-only (stop every instance of the previous release first)')
      .action(async (opts: { allowBreaking?: boolean }, cmd: Command) => {
        await runCommand(
          jsonWanted(cmd),
          async ({ store, json }) => {
            refuseBreaking(await store.pendingMigrations(), opts.allowBreaking === true);
            const applied = await store.migrate();
            emit(json, { dialect: store.dialect, applied }, () =>
              applied.length === 0
                ? `The ${store.dialect} database is up to date: no pending migration.`
                : `Applied ${plural(applied.length, 'migration')} to the ${store.dialect} database:\n${applied.map((m) => `  ${m}`).join('\n')}`,
            );
          },
          { prepare: 'none', mayCreateDatabase: true },
        );
      }),
  );
}
