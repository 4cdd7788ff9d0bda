/**
 * Runs one `cos-admin` command in this process, as main.ts does (same program, same failure
 * reporting), capturing what it writes on stdout and stderr and its exit status. The environment is
 * the test's `env` over the parent's, without any other service configuration; console.* and
 * process.exitCode are restored afterwards.
 */
import { buildProgram } from '../../src/program.js';
import { EXIT_USAGE, reportFailure } from '../../src/errors.js';
import { CONFIG_VARIABLES, type CliResult, type Env } from './cli.js';

export async function runInProcess(args: readonly string[], env: Env): Promise<CliResult> {
  const saved = { env: process.env, exitCode: process.exitCode, out: process.stdout.write, err: process.stderr.write, console: { ...console } };
  let stdout = '';
  let stderr = '';
  const clean: NodeJS.ProcessEnv = { ...process.env };
  for (const v of CONFIG_VARIABLES) delete clean[v];
  process.env = { ...clean, ...env };
  process.exitCode = undefined;
  process.stdout.write = ((chunk: string | Uint8Array) => ((stdout += chunk.toString()), true)) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => ((stderr += chunk.toString()), true)) as typeof process.stderr.write;
  let code: number;
  try {
    await buildProgram().parseAsync([...args], { from: 'user' });
    code = typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (e) {
    const c = (e as { code?: unknown }).code;
    if ((e as { exitCode?: unknown }).exitCode === 0 && typeof c === 'string' && c.startsWith('commander.')) code = 0;
    else if (c === 'commander.help') code = EXIT_USAGE;
    else code = reportFailure(e, args.includes('--json'));
  } finally {
    process.stdout.write = saved.out;
    process.stderr.write = saved.err;
    Object.assign(console, saved.console);
    process.env = saved.env;
    process.exitCode = saved.exitCode;
  }
  return { code, stdout, stderr };
}
