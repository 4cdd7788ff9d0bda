/** The `cos-admin` command tree (contract, "Operator interface"), exactly as named there. */
import { Command } from 'commander';
import { registerAudit } from './commands/audit.js';
import { registerBootstrap } from './commands/bootstrap.js';
import { registerKey } from './commands/key.js';
import { registerMember } from './commands/member.js';
import { registerMigrate } from './commands/migrate.js';
import { registerNotifications } from './commands/notifications.js';
import { registerOrg } from './commands/org.js';
import { registerServe } from './commands/serve.js';
import { CONFIG_TABLE } from './config.js';
import { serviceVersion } from './version.js';

function configHelp(): string {
  const width = Math.max(...CONFIG_TABLE.map((r) => r.variable.length));
  const dflt = Math.max(...CONFIG_TABLE.map((r) => r.default.length));
  return [
    '',
    'Configuration (environment variables; a .env file in the working directory is read when present):',
    ...CONFIG_TABLE.map((r) => `  ${r.variable.padEnd(width)}  ${r.default.padEnd(dflt)}  ${r.meaning}`),
    '',
    'Exit status: 0 on success; 1 on failure, with one line on stderr.',
  ].join('\n');
}

export function buildProgram(): Command {
  const program = new Command('cos-admin')
    .description('Compliance Organisation Service administration: run the server and manage organisations, members and API keys.')
    .version(serviceVersion(), '-V, --version', 'print the service version')
    .option('--json', 'print machine-readable JSON on stdout (and nothing else there)')
    .showSuggestionAfterError(true)
    .configureOutput({
      outputError: (text, write) => write(`cos-admin: ${text.replace(/^error: /, '')}`),
    })
    .addHelpText('after', configHelp());
  registerMigrate(program);
  registerBootstrap(program);
  registerServe(program);
  registerOrg(program);
  registerMember(program);
  registerKey(program);
  registerAudit(program);
  registerNotifications(program);
  return program;
}
