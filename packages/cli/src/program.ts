/** The `cos-admin` command tree (contract, "Operator interface"), exactly as named there. */
import { Command, type OutputConfiguration } from 'commander';
import { registerAudit } from './commands/audit.js';
import { registerBootstrap } from './commands/bootstrap.js';
import { registerDb } from './commands/db.js';
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
    'Durations (--expires-in, --grace, --overlap, --max-lifetime, --unused-for, --older-than,',
    '--expiry-notice, --expiring-within): whole',
    'numbers with units w, d, h, m, s, largest first, each once: 30s, 15m, 12h, 7d, 2w, 1h30m. Zero (0)',
    'only where the option says so (--grace, --overlap, --expiry-notice).',
    'Timestamps (--expires-at, --since, --until): a date, 2027-01-01 = that day 00:00 UTC, or an RFC 3339',
    'time with its offset, 2027-01-01T09:30:00Z or 2027-01-01T10:30:00+01:00.',
    '',
    'Exit status: 0 on success; 2 when the command line is wrong (unknown command or option, missing',
    'argument, malformed or invalid argument or option value, such as an id that is not a UUID or a',
    'webhook URL refused: the message names the argument or option); 1 on any other failure',
    '(including "not found"). Removing what is already gone (key revoke, member remove, org webhook',
    'remove) changes nothing and exits 0, saying so. A failure prints one line on stderr:',
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
    // Every subcommand's help lists --json and --actor too (under "Global Options"); subcommands
    // created after this inherit the setting.
    .configureHelp({ showGlobalOptions: true })
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
  registerDb(program);
  return program;
}
