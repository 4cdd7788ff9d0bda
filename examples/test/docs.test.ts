/**
 * No code in the docs that the tests do not run: every code block of docs/embedding.md
 * is either an example file, byte for byte, or the command that runs one, and those commands are
 * run here exactly as written. The one example in another language, the shell gateway that checks
 * keys through POST /v1/introspect (examples/check-key.sh), is run here against a live service.
 */
import { execFile, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { OPERATOR } from '@cos/core';
import { createTestCore } from '@cos/core/testing';
import { createKoaApp } from '@cos/adapter-koa';

const run = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOC = join(ROOT, 'docs', 'embedding.md');
/** The gateway in another language: a POSIX shell script with curl, shown in the doc and run below. */
const SHELL_EXAMPLE = 'examples/check-key.sh';
const COMMAND = /^node --import tsx --conditions=source (examples\/[\w.-]+\.ts)$/;

interface Block {
  readonly lang: string;
  readonly body: string;
  /** The `<!-- example: path -->` line right before the block, if any. */
  readonly marker: string | undefined;
  /** True for the block after `<!-- install: … -->`: how to get the packages, run by pack.test.ts. */
  readonly install: boolean;
}

function codeBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const fence = /^```([^\n]*)\n([\s\S]*?)^```[ \t]*$/gm;
  for (let m = fence.exec(markdown); m !== null; m = fence.exec(markdown)) {
    const before = markdown.slice(0, m.index).trimEnd().split('\n').at(-1) ?? '';
    const marker = /^<!-- example: (\S+) -->$/.exec(before)?.[1];
    blocks.push({ lang: m[1]!.trim(), body: m[2]!, marker, install: /^<!-- install: .* -->$/.test(before) });
  }
  return blocks;
}

const exampleFiles = readdirSync(join(ROOT, 'examples'))
  .filter((f) => /^\d\d-.*\.ts$/.test(f))
  .map((f) => `examples/${f}`)
  .sort();

describe('docs/embedding.md: every code block is tested', () => {
  const blocks = codeBlocks(readFileSync(DOC, 'utf8'));

  it('has one install block (how an outside project gets the packages), run by examples/test/pack.test.ts', () => {
    const install = blocks.filter((b) => b.install);
    expect(install).to.have.length(1);
    expect(install[0]!.lang).to.equal('sh');
    expect(readFileSync(DOC, 'utf8')).to.include('<!-- install: examples/test/pack.test.ts runs this block -->');
  });

  it('has only ts blocks (example files) and sh blocks (commands that run one, or the install block)', () => {
    expect(blocks.length).to.be.greaterThan(0);
    for (const b of blocks) expect(['ts', 'sh'], `a \`\`\`${b.lang} block`).to.include(b.lang);
  });

  it('includes each of the four example files once, verbatim, after its <!-- example: --> marker', () => {
    expect(exampleFiles).to.deep.equal([
      'examples/01-core-with-sql-store.ts',
      'examples/02-mount-router-in-koa.ts',
      'examples/03-build-container-override.ts',
      'examples/04-custom-scope.ts',
    ]);
    const ts = blocks.filter((b) => b.lang === 'ts');
    expect(ts.map((b) => b.marker)).to.deep.equal(exampleFiles);
    for (const b of ts) {
      const file = readFileSync(join(ROOT, b.marker!), 'utf8');
      expect(b.body, `${b.marker} differs from its copy in docs/embedding.md: paste the file into the block`).to.equal(file);
    }
  });

  it('shows the command of each example once, and each command runs standalone and prints main()\'s result', async function () {
    this.timeout(90_000);
    const commands = blocks.filter((b) => b.lang === 'sh' && !b.install && b.marker === undefined).map((b) => b.body.trim());
    const files = commands.map((c) => COMMAND.exec(c)?.[1]);
    expect(files, 'sh blocks must each be one `node --import tsx --conditions=source examples/…` line').to.deep.equal(
      exampleFiles,
    );
    const outputs = await Promise.all(
      commands.map(async (command) => {
        const [node, ...args] = command.split(' ');
        expect(node).to.equal('node');
        const { stdout } = await run(process.execPath, args, { cwd: ROOT, timeout: 60_000 });
        return JSON.parse(stdout) as Record<string, unknown>;
      }),
    );
    const [first, second, third, fourth] = outputs as [
      { afterRevoke: string; audit: string[] },
      { created: { status: number; location: string } },
      { statuses: number[] },
      { reportWithScope: { status: number }; reportWithoutScope: { status: number } },
    ];
    expect(first.afterRevoke).to.equal('UNAUTHORIZED');
    expect(first.audit).to.include('api_key_revoked');
    expect(second.created.status).to.equal(201);
    expect(second.created.location).to.match(/^\/compliance\/v1\/organisations\//);
    expect(third.statuses).to.deep.equal([200, 200, 429, 200, 401]);
    expect([fourth.reportWithScope.status, fourth.reportWithoutScope.status]).to.deep.equal([200, 403]);
  });

  it('includes the shell gateway (examples/check-key.sh) verbatim, and it checks keys through POST /v1/introspect against a live service', async function () {
    this.timeout(60_000);
    const shell = blocks.filter((b) => b.marker === SHELL_EXAMPLE);
    expect(shell.map((b) => b.lang)).to.deep.equal(['sh']);
    expect(shell[0]!.body).to.equal(readFileSync(join(ROOT, SHELL_EXAMPLE), 'utf8'));

    const tc = createTestCore({ config: { rateLimitPerMinute: 2 } });
    const system = await tc.core.organisations.create(OPERATOR, { name: 'Platform', slug: 'platform' }, { isSystem: true });
    const gateway = await tc.core.apiKeys.issue(OPERATOR, system.id, { label: 'gateway', scopes: ['keys:introspect'] });
    const tenant = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    const client = await tc.core.apiKeys.issue(OPERATOR, tenant.id, { label: 'client' });
    const revoked = await tc.core.apiKeys.issue(OPERATOR, tenant.id, { label: 'revoked' });
    await tc.core.apiKeys.revoke(OPERATOR, tenant.id, revoked.key.id);
    const server = createServer(createKoaApp({ core: tc.core, logger: tc.logger }, { serviceVersion: '0.0.0' }).callback());
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const check = (token: string, env: Record<string, string> = {}) =>
      new Promise<{ code: number | null; stdout: string }>((done, fail) => {
        const child = spawn('sh', [join(ROOT, SHELL_EXAMPLE)], { env: { PATH: process.env['PATH'] ?? '', COS_URL: url, COS_INTROSPECT_KEY: gateway.rawKey, ...env } });
        let stdout = '';
        child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
        child.on('error', fail);
        child.on('close', (code) => done({ code, stdout }));
        child.stdin.end(`${token}\n`);
      });
    try {
      expect(await check(client.rawKey)).to.deep.equal({ code: 0, stdout: `${tenant.id}\n` });
      expect((await check(revoked.rawKey)).code, 'a revoked key').to.equal(1);
      expect((await check('not a key; rm -rf /')).code, 'anything else').to.equal(1);
      expect((await check(client.rawKey)).code, "the organisation's second request: still within 2").to.equal(0);
      expect((await check(client.rawKey)).code, 'the third: over the limit').to.equal(2);
      expect((await check(client.rawKey, { COS_INTROSPECT_KEY: client.rawKey })).code, 'a gateway key without keys:introspect: 403').to.equal(3);
    } finally {
      await new Promise((done) => server.close(done));
    }
  });
});
