/**
 * scripts/check-private-api.mjs, run by `pnpm check`: it must refuse a deep import of an
 * unexported subpath and any `_`-prefixed member of somebody else's object, and pass documented API.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';

const exec = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCRIPT = join(ROOT, 'scripts', 'check-private-api.mjs');

async function check(files: Record<string, string>): Promise<{ code: number; output: string }> {
  // Inside the repository, so that packages resolve from its node_modules as they do for src.
  const dir = mkdtempSync(join(ROOT, 'examples', '.private-api-'));
  try {
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    try {
      const { stdout, stderr } = await exec(process.execPath, [SCRIPT, dir]);
      return { code: 0, output: stdout + stderr };
    } catch (e) {
      const err = e as { code: number; stdout: string; stderr: string };
      return { code: err.code, output: err.stdout + err.stderr };
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('pnpm check: no private API of a dependency', () => {
  it('passes the repository as it is', async () => {
    const { stdout } = await exec(process.execPath, [SCRIPT]);
    expect(stdout).to.contain('no private API of a dependency is used');
  });

  it('passes documented entry points and exported subpaths', async () => {
    const result = await check({
      'ok.ts': [
        "import knex from 'knex';",
        "import { createServer } from 'node:http';",
        "import { z } from 'zod';",
        "import { describeApiKeyStore } from '@cos/core/testing';",
        'export const used = [knex, createServer, z, describeApiKeyStore];',
        'export function ignoreUnused(_unused: number): void {}',
      ].join('\n'),
    });
    expect(result.output).to.contain('no private API');
    expect(result.code).to.equal(0);
  });

  it('refuses an unexported deep import, a private member read, declared or overridden', async () => {
    const result = await check({
      'deep.ts': "import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\nexport const Base = require('knex/lib/dialects/postgres/index.js');\n",
      'member.ts': [
        'interface Client { _query(sql: string): Promise<unknown> }',
        'export function run(client: Client, socket: object): unknown {',
        "  return [client._query('SELECT 1'), (socket as Record<string, unknown>)['_httpMessage']];",
        '}',
      ].join('\n'),
    });
    expect(result.code).to.equal(1);
    expect(result.output).to.match(/deep\.ts:3: import of 'knex\/lib\/dialects\/postgres\/index\.js': knex does not export/);
    expect(result.output).to.match(/member\.ts:1: declares or overrides the private member _query/);
    expect(result.output).to.match(/member\.ts:3: reads the private member _query/);
    expect(result.output).to.match(/member\.ts:3: reads the private member _httpMessage/);
  });
});
