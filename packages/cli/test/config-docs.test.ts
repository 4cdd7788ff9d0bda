/**
 * One configuration table in code (config.ts); the tables of README.md,
 * docs/operations.md and packages/cli/README.md, `.env.example` and `--help` are generated from it,
 * and the documented defaults are the ones loadConfig applies. Also the .env file: a bad value
 * names the file and line it came from, and a malformed line is reported, not skipped.
 */
import { writeFileSync } from 'node:fs';
import { expect } from 'chai';
import { CONFIG_TABLE, loadConfig } from '../src/config.js';
import { parseEnvFile } from '../src/env-file.js';
import { runCli, tempDir } from './support/cli.js';
import { currentText, ENV_EXAMPLE, expectedText, MARKDOWN_FILES } from './support/config-docs.js';

describe('configuration documentation', function () {
  this.timeout(60_000);

  for (const file of [...MARKDOWN_FILES, ENV_EXAMPLE]) {
    it(`${file} shows the configuration table of config.ts (else run \`pnpm docs:config\`)`, () => {
      expect(currentText(file), `${file} is stale: run pnpm docs:config`).to.equal(expectedText(file));
    });
  }

  it('every documented default is the one loadConfig applies', () => {
    const defaults = loadConfig({}, { envFile: false });
    for (const row of CONFIG_TABLE) {
      if (row.default === 'unset') continue;
      expect(loadConfig({ [row.variable]: row.default }, { envFile: false }), `${row.variable}=${row.default}`).to.deep.equal({
        ...defaults,
        ...(row.variable === 'LOG_LEVEL' ? { logLevelExplicit: true } : {}),
      });
    }
  });

  it('.env.example names every variable, and read as a .env it is the default configuration', () => {
    const { values, problems } = parseEnvFile(expectedText(ENV_EXAMPLE));
    expect(problems).to.deep.equal([]);
    const text = expectedText(ENV_EXAMPLE);
    for (const row of CONFIG_TABLE) expect(text).to.match(new RegExp(`^(# )?${row.variable}=`, 'm'));
    const env = Object.fromEntries([...values].map(([k, v]) => [k, v.value]));
    expect(loadConfig(env, { envFile: false })).to.deep.equal({ ...loadConfig({}, { envFile: false }), logLevelExplicit: true });
  });

  it('--help lists every variable with its default', async () => {
    const help = (await runCli(['--help'], {}, process.cwd())).stdout;
    for (const row of CONFIG_TABLE) expect(help).to.match(new RegExp(`\\n  ${row.variable} +${row.default.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} `));
  });
});

describe('the .env file', function () {
  this.timeout(60_000);

  it('parses NAME=value, export, comments, quotes (multi-line in "…") and reports malformed lines by number', () => {
    const { values, problems } = parseEnvFile(
      ['# comment', '', 'A=1', 'export B = two # note', 'C="x\\ny"', "D='#kept'", 'E="multi', 'line"', 'F=', 'oops', '9X=1', 'G="x" trailing'].join('\n'),
    );
    expect(Object.fromEntries([...values].map(([k, v]) => [k, [v.value, v.line]]))).to.deep.equal({
      A: ['1', 3],
      B: ['two', 4],
      C: ['x\ny', 5],
      D: ['#kept', 6],
      E: ['multi\nline', 7],
      F: ['', 9],
    });
    expect(problems.map((p) => p.line)).to.deep.equal([10, 11, 12]);
    expect(parseEnvFile('H="never closed\nI=1').problems).to.deep.equal([{ line: 1, problem: 'the quoted value of H is not closed' }]);
  });

  it('a bad value from .env names the file and the line; the same value from the environment does not', async () => {
    const tmp = tempDir();
    try {
      writeFileSync(`${tmp.dir}/.env`, 'DATABASE_URL=sqlite::memory:\n\n# the port\nPORT=not-a-port\n');
      const r = await runCli(['org', 'list'], {}, tmp.dir);
      expect(r.code).to.equal(1);
      expect(r.stderr.trim()).to.equal(`cos-admin: invalid configuration: PORT must be an integer from 0 to 65535 (from ${tmp.dir}/.env line 4)`);
      const env = await runCli(['org', 'list'], { PORT: 'nope' }, tmp.dir);
      expect(env.stderr.trim()).to.equal('cos-admin: invalid configuration: PORT must be an integer from 0 to 65535');
    } finally {
      tmp.remove();
    }
  });

  it('malformed .env lines stop the command with one line naming the file and each line, never echoing a value', async () => {
    const tmp = tempDir();
    try {
      writeFileSync(`${tmp.dir}/.env`, 'DATABASE_URL=sqlite::memory:\nPORT 3000\nREDIS_URL="redis://:s3cret@x\n');
      const r = await runCli(['org', 'list', '--json'], {}, tmp.dir);
      expect(r.code).to.equal(1);
      expect(r.stdout).to.equal('');
      expect(JSON.parse(r.stderr)).to.deep.equal({
        error: 'CONFIG_ERROR',
        message: `${tmp.dir}/.env: line 2: expected NAME=value; line 3: the quoted value of REDIS_URL is not closed`,
      });
      expect(r.stderr).not.to.include('s3cret');
    } finally {
      tmp.remove();
    }
  });
});
