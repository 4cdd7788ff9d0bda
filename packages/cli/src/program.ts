/** The `cos-admin` command tree (contract, "Operator interface"), exactly as named there. */
import { Command, type OutputConfiguration } from 'commander';
import { registerAudit } from './commands/audit.js';
import { registerBootstrap } from './commands/bootstrap.js';
import { registerKey } from './commands/key.js';
import { registerMember } from './commands/member.js';
import { registerMigrate } from './commands/migrate.js';
import { registerNotifications } from './commands/notifications.js';
import { registerOrg } from './commands/org.js';
import { registerServe } from './commands/serve.js';
import { configHelpTable } from './config-docs.js';
import { currentIo } from './io.js';
import { serviceVersion } from './version.js';

function configHelp(): string {
  return [
    '',
    'Configuration (environment variables; a .env file in the working directory is read when present):',
    ...configHelpTable(),
    '',
    'Exit status: 0 on success; 2 when the command line is wrong (unknown command or option, missing',
    'argument, malformed option value); 1 on any other failure. A failure prints one line on stderr:',
    '"cos-admin: <message>", or with --json {"error": "<CODE>", "message": "<message>"} (stdout stays empty).',
  ].join('\n');
}

/** Commander's own output (help, version) into the run's streams, for a run that does not own the process. */
function runOutput(): OutputConfiguration {
  const io = currentIo();
  if (io.ownsProcess) return {};
  return {
    writeOut: (text) => io.stdout.write(text),
    writeErr: (text) => io.stderr.write(text),
    getOutHelpWidth: () => 80,
    getErrHelpWidth: () => 80,
    getOutHasColors: () => false,
    getErrHasColors: () => false,
  };
}

export function buildProgram(): Command {
  const program = new Command('cos-admin')
    .description('Compliance Organisation Service administration: run the server and manage organisations, members and API keys.')
    .version(serviceVersion(), '-V, --version', 'print the service version')
    .option('--json', 'print machine-readable JSON on stdout (and nothing else there)')
    .option('--actor <name>', 'who is acting, recorded as the operator in the audit log (default: the OS user name)')
    .showSuggestionAfterError(true)
    // commander's errors are thrown (not printed, no process.exit) and reported by run.ts, in
    // the --json form when asked, with exit status 2. Subcommands inherit both settings.
    .exitOverride()
    .configureOutput({ outputError: () => undefined, ...runOutput() })
    .addHelpText('after', configHelp())
    .hook('preAction', (_program, action) => {
      currentIo().state.actor = action.optsWithGlobals<{ actor?: string }>().actor;
    });
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
