/**
 * User-facing text says the rule itself, never an internal rule id (`C-25`, `C-51`, …)
 * nor a document that is not in the repository. Checked: `cos-admin --help` of every command,
 * docs/openapi.yaml (which Spectral and Redocly also lint in `pnpm check`) and the operator docs. Rule ids stay welcome
 * in code comments and test names.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import type { Command } from 'commander';
import { buildProgram } from '../src/program.js';
import { ROOT, runCli } from './support/cli.js';

const RULE_ID = /\bC-\d+\b/g;
const EXTERNAL_DOCS = /service-api-v1\.md|contract\.md|architecture\.md|§/g;

function allCommands(cmd: Command): Command[] {
  return [cmd, ...cmd.commands.flatMap((c) => allCommands(c))];
}

/** The full help of a command as `--help` prints it (with the text added after it). */
function helpOf(cmd: Command): string {
  let out = '';
  cmd.configureOutput({ writeOut: (s) => (out += s), writeErr: (s) => (out += s) });
  cmd.outputHelp();
  return out;
}

describe('no internal rule ids in user-facing text', function () {
  this.timeout(60_000);

  it('cos-admin --help, for the program and every command, names no rule id', async () => {
    const commands = allCommands(buildProgram());
    expect(commands.length).to.be.greaterThan(20);
    for (const cmd of commands) {
      const help = helpOf(cmd);
      expect(help, cmd.name()).to.match(/^Usage: /);
      expect(help.match(RULE_ID), `${cmd.name()} --help`).to.equal(null);
    }
    const top = await runCli(['--help'], {}, process.cwd());
    expect(top.stdout).to.include('Configuration (environment variables');
    expect(top.stdout.match(RULE_ID), 'cos-admin --help as run').to.equal(null);
  });

  it('docs/openapi.yaml names no rule id and cites no document outside the repository', () => {
    const text = readFileSync(join(ROOT, 'docs', 'openapi.yaml'), 'utf8');
    expect(text.match(RULE_ID)).to.equal(null);
    expect(text.match(EXTERNAL_DOCS)).to.equal(null);
  });

  for (const doc of ['README.md', 'docs/operations.md', 'docs/performance.md', 'packages/cli/README.md']) {
    it(`${doc} (operator documentation) names no rule id`, () => {
      expect(readFileSync(join(ROOT, doc), 'utf8').match(RULE_ID)).to.equal(null);
    });
  }

  /** The source and documentation files under `dirs` (dependencies and builds left out), as paths. */
  const filesUnder = (dirs: readonly string[], name: RegExp): string[] => {
    const found: string[] = [];
    const walk = (dir: string): void => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name.startsWith('.')) continue;
        const path = join(dir, entry.name);
        if (entry.isDirectory()) walk(path);
        else if (name.test(entry.name)) found.push(path);
      }
    };
    for (const dir of dirs) walk(join(ROOT, dir));
    return found;
  };

  it('every rule id cited in code, tests and docs/decisions is defined in docs/rules.md', () => {
    const defined = new Set([...readFileSync(join(ROOT, 'docs', 'rules.md'), 'utf8').matchAll(/^## (C-\d+):/gm)].map((m) => m[1]));
    const cited = new Map<string, string>();
    for (const path of filesUnder(['packages', 'docs/decisions', 'bench', 'examples', 'scripts'], /\.(ts|mjs|cjs|md)$/)) {
      for (const id of readFileSync(path, 'utf8').match(RULE_ID) ?? []) if (!cited.has(id)) cited.set(id, path);
    }
    expect(cited.size).to.be.greaterThan(40);
    const undefinedIds = [...cited].filter(([id]) => !defined.has(id)).map(([id, path]) => `${id} (${relative(ROOT, path)})`);
    expect(undefinedIds, 'rule ids cited but not defined in docs/rules.md').to.deep.equal([]);
  });

  it('every section of the v1 specification cited (`spec §5.4`) is in docs/rules.md\'s table of citations', () => {
    const rules = join(ROOT, 'docs', 'rules.md');
    const listed = new Set([...readFileSync(rules, 'utf8').matchAll(/^\| spec §(\d+(?:\.\d+)?) \|/gm)].map((m) => m[1]));
    const cited = new Map<string, string>();
    for (const path of filesUnder(['packages', 'docs', 'bench', 'examples', 'scripts'], /\.(ts|mjs|cjs|md|yaml)$/)) {
      if (path === rules) continue;
      // `spec §5.3-§5.5`, `spec §5, §8`, `spec §5.3-5.4`: every section or rule named in the citation.
      for (const citation of readFileSync(path, 'utf8').matchAll(/\bspec (§\d+(?:\.\d+)?(?:\s*[-,;]\s*§?\d+(?:\.\d+)?)*)/g)) {
        for (const part of citation[1]!.match(/\d+(?:\.\d+)?/g) ?? []) if (!cited.has(part)) cited.set(part, path);
      }
    }
    expect(cited.size).to.be.greaterThan(10);
    const unlisted = [...cited].filter(([part]) => !listed.has(part)).map(([part, path]) => `spec §${part} (${relative(ROOT, path)})`);
    expect(unlisted, 'cited but not in the table of docs/rules.md').to.deep.equal([]);
  });

  it('docs/openapi.yaml passes Spectral (spectral:oas) and Redocly (recommended, warnings as errors), as `pnpm check` runs them', async () => {
    const run = promisify(execFile);
    const bin = (name: string): string => join(ROOT, 'node_modules', '.bin', name);
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['check']).to.include('pnpm lint:openapi');
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
    // The two linters are independent processes: side by side.
    const [spectral, redocly] = await Promise.all([
      run(bin('spectral'), ['lint', '--fail-severity=hint', 'docs/openapi.yaml'], { cwd: ROOT }),
      run(bin('redocly'), ['lint', '--format=summary', 'docs/openapi.yaml'], { cwd: ROOT, env }),
    ]);
    expect(spectral.stdout).to.match(/No results with a severity of 'hint' or higher found/);
    expect(`${redocly.stdout}${redocly.stderr}`).to.match(/Your API description is valid/);
    expect(`${redocly.stdout}${redocly.stderr}`).not.to.match(/You have \d+ (warning|error)|^(warning|error) /m);
  });
});
