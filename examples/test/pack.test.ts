/**
 * A package can be consumed from a packed tarball, the way docs/embedding.md tells an outside
 * project to get the packages, followed literally. The guide's install block is run by bash (its
 * `npx -y pnpm@10 install` line aside: this workspace is installed already): it builds the
 * workspace, packs the six packages with `pnpm pack` (which rewrites `workspace:*` and applies
 * publishConfig) into $COS_TARBALLS, and installs them by path, with `koa`, `knex` and `tsx` from
 * the registry, into an empty ESM project outside the workspace with plain `npm install` (where
 * store-sql's better-sqlite3 compiles: the slowest step of the whole suite). The project then uses
 * them the way a host service would, by package name only, from JavaScript and from strict
 * TypeScript, and runs each of the guide's four example files, copied in, with `node --import tsx`.
 */
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { copyFileSync, createReadStream, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';

const exec = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const RAW_KEY = /svc_(live|test)_[A-Za-z0-9]{48}/;
const GUIDE = join(ROOT, 'docs', 'embedding.md');
const PACKAGES = ['core', 'store-sql', 'adapter-koa', 'limiter-redis', 'webhook-sender', 'cli'];
const EXAMPLES = readdirSync(join(ROOT, 'examples')).filter((f) => /^\d\d-.*\.ts$/.test(f)).sort();

/** The sh block after `<!-- install: … -->` in docs/embedding.md. */
function installBlock(): string {
  const m = /^<!-- install: [^\n]*-->\n```sh\n([\s\S]*?)^```$/m.exec(readFileSync(GUIDE, 'utf8'));
  if (m === null) throw new Error('docs/embedding.md has no install block');
  return m[1]!;
}

/**
 * A local download host for better-sqlite3's prebuilt binary, in the layout prebuild-install asks
 * for (`<host>/v<version>/better-sqlite3-v<version>-node-v<abi>-<platform>-<arch>.tar.gz`), serving
 * the binary this workspace's install already compiled, for that exact version, Node ABI, platform
 * and architecture only (anything else is 404, and the install compiles as the guide says). The
 * scratch install is pointed at it with the documented prebuild-install setting
 * `npm_config_better_sqlite3_binary_host`, so the suite does not compile SQLite again: that
 * compile is several minutes on a loaded 2-core machine, and it tests nothing of ours.
 */
async function prebuiltBetterSqlite3(work: string): Promise<{ host: string; served: () => number; close: () => void }> {
  const dir = dirname(createRequire(join(ROOT, 'packages', 'store-sql', 'package.json')).resolve('better-sqlite3/package.json'));
  const { version } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string };
  const tarball = join(work, 'better-sqlite3-prebuilt.tar.gz');
  await exec('tar', ['czf', tarball, '-C', dir, 'build/Release/better_sqlite3.node']);
  const wanted = `/v${version}/better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  let served = 0;
  const server = createServer((req, res) => {
    if (req.url !== wanted) return void res.writeHead(404).end();
    served++;
    res.writeHead(200, { 'content-type': 'application/gzip' });
    createReadStream(tarball).pipe(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { host: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, served: () => served, close: () => server.close() };
}

async function tarList(tarball: string): Promise<string[]> {
  const { stdout } = await exec('tar', ['tzf', tarball]);
  return stdout.trim().split('\n');
}

async function tarManifest(tarball: string): Promise<Record<string, unknown>> {
  const { stdout } = await exec('tar', ['xzf', tarball, '-O', 'package/package.json']);
  return JSON.parse(stdout) as Record<string, unknown>;
}

const SMOKE_CORE = `
import { apiKeyView, createCore, InProcessRateCounter, OPERATOR } from '@cos/core';
import { createInMemoryStore } from '@cos/core/testing';

const store = createInMemoryStore();
const core = createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter: new InProcessRateCounter() });
const org = await core.organisations.create(OPERATOR, { name: 'Packed Ltd', slug: 'packed' });
const issued = await core.apiKeys.issue(OPERATOR, org.id, { label: 'from a tarball' });
const principal = await core.authenticator.authenticate('Bearer ' + issued.rawKey);
let afterRevoke = 'accepted';
await core.apiKeys.revoke(principal, org.id, issued.key.id);
try { await core.authenticator.authenticate('Bearer ' + issued.rawKey); } catch (e) { afterRevoke = e.code; }
console.log(JSON.stringify({
  principal: { kind: principal.kind, organisationId: principal.organisationId, isPlatform: principal.isPlatform, keyPrefix: principal.keyPrefix },
  orgId: org.id,
  key: apiKeyView(issued.key, core.clock.now()),
  rawKeyShape: /^svc_live_[A-Za-z0-9]{48}$/.test(issued.rawKey),
  afterRevoke,
  health: (await core.health.check()).status,
}));
`;

const SMOKE_KOA = `
import { once } from 'node:events';
import { createCore, InProcessRateCounter, OPERATOR, silentLogger } from '@cos/core';
import { createInMemoryStore } from '@cos/core/testing';
import { createKoaApp } from '@cos/adapter-koa';

const store = createInMemoryStore();
const core = createCore({ stores: store.stores, unitOfWork: store.unitOfWork, health: store.health, counter: new InProcessRateCounter() });
const org = await core.organisations.create(OPERATOR, { name: 'Packed Ltd', slug: 'packed' });
const { rawKey } = await core.apiKeys.issue(OPERATOR, org.id, { label: 'http' });
const server = createKoaApp({ core, logger: silentLogger }, { serviceVersion: '0.1.0' }).listen(0, '127.0.0.1');
await once(server, 'listening');
const base = 'http://127.0.0.1:' + server.address().port + '/v1';
const version = await fetch(base + '/version');
const own = await fetch(base + '/organisations/' + org.id, { headers: { authorization: 'Bearer ' + rawKey } });
console.log(JSON.stringify({ version: await version.json(), own: { status: own.status, body: await own.json() } }));
server.close();
`;

const CONSUMER_TS = `
import {
  createCore,
  InProcessRateCounter,
  OPERATOR,
  organisationView,
  silentLogger,
  validateCreateOrganisation,
  type Core,
  type OrganisationView,
} from '@cos/core';
import { createInMemoryStore, FakeClock, type StoreHarness } from '@cos/core/testing';
import { createV1Router, mountAt, type HttpOptions } from '@cos/adapter-koa';
import type Koa from 'koa';

const store: StoreHarness = createInMemoryStore();
const core: Core = createCore({ ...store, counter: new InProcessRateCounter(), clock: new FakeClock() });
const options: HttpOptions = { serviceVersion: '0.1.0' };
const middleware: Koa.Middleware = mountAt('/compliance', createV1Router({ core, logger: silentLogger }, options));
export async function created(): Promise<OrganisationView> {
  return organisationView(await core.organisations.create(OPERATOR, { name: 'Typed', slug: 'typed' }));
}
const input: { name: string; slug: string } = validateCreateOrganisation({ name: 'Typed', slug: 'typed' });
// @ts-expect-error the validated input has no industry_section (C-12)
export const section: string = input.industry_section;
export { middleware };
`;

describe('packaging: the @cos packages from packed tarballs in a scratch project (docs/embedding.md)', function () {
  // Each test runs an installed script (seconds) or tsc over the shipped declarations (up to 51 s
  // on this 2-core machine under other suites' load). The before hook's install has its own budget
  // below: it may have to compile better-sqlite3 (see prebuiltBetterSqlite3).
  this.timeout(240_000);
  let work: string;
  let scratch: string;
  let coreTarball: string;
  let koaTarball: string;
  let tarballs: string[];
  let installOutput: string;
  /** How many times the scratch install fetched the workspace's prebuilt better-sqlite3 (0: it compiled). */
  let prebuiltServed = 0;

  before(async function () {
    this.timeout(600_000);
    work = mkdtempSync(join(tmpdir(), 'cos-pack-'));
    scratch = join(work, 'scratch');
    mkdirSync(scratch);
    writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }, null, 2));
    const block = installBlock();
    const lines = block.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('npx -y pnpm@10 install'))).to.have.length(1);
    expect(lines.filter((l) => l.startsWith('cd /path/to/your-project'))).to.have.length(1);
    const script = lines
      .filter((l) => !l.startsWith('npx -y pnpm@10 install')) // the workspace is installed already
      .map((l) => l.replace(/^export COS_TARBALLS=.*$/, `export COS_TARBALLS=${JSON.stringify(join(work, 'cos-tarballs'))}`))
      .map((l) => l.replace(/^cd \/path\/to\/your-project$/, `cd ${JSON.stringify(scratch)}`))
      .join('\n');
    // No chai, no mocha: @cos/core/testing must work without a test framework (only
    // @cos/core/testing/contracts needs them, as optional peers).
    const prebuilt = await prebuiltBetterSqlite3(work);
    try {
      const { stdout } = await exec('bash', ['-euo', 'pipefail', '-c', script], {
        cwd: ROOT,
        timeout: 590_000,
        maxBuffer: 16 * 1024 * 1024,
        env: {
          ...process.env,
          npm_config_audit: 'false',
          npm_config_fund: 'false',
          npm_config_prefer_offline: 'true',
          npm_config_better_sqlite3_binary_host: prebuilt.host,
        },
      });
      installOutput = stdout;
      prebuiltServed = prebuilt.served();
    } finally {
      prebuilt.close();
    }
    coreTarball = join(work, 'cos-tarballs', 'cos-core-0.1.0.tgz');
    koaTarball = join(work, 'cos-tarballs', 'cos-adapter-koa-0.1.0.tgz');
    tarballs = PACKAGES.map((p) => join(work, 'cos-tarballs', `cos-${p}-0.1.0.tgz`));
  });

  it('the install block packs all six packages quietly: its whole output is a few lines, not one per packed file', () => {
    expect(readdirSync(join(work, 'cos-tarballs')).sort()).to.deep.equal(tarballs.map((t) => t.slice(t.lastIndexOf('/') + 1)).sort());
    const lines = installOutput.trim().split('\n');
    expect(lines.length, installOutput).to.be.below(20);
    expect(installOutput).not.to.match(/\.d\.ts|dist\//);
    // Not an assertion on the product: says whether this run compiled SQLite (slow) or not.
    console.log(`      (better-sqlite3: ${prebuiltServed > 0 ? 'the workspace\'s binary, not compiled' : 'compiled from source'})`);
  });

  it('the guide never tells anyone to install an @cos package by name from a registry', () => {
    const texts = [GUIDE, ...['core', 'store-sql', 'adapter-koa', 'cli', 'limiter-redis', 'webhook-sender'].map((p) => join(ROOT, 'packages', p, 'README.md'))];
    for (const file of texts) expect(readFileSync(file, 'utf8'), file).not.to.match(/(npm|pnpm|yarn) (install|i|add) (-\S+ )*@cos\//);
    expect(readFileSync(join(scratch, 'package.json'), 'utf8')).to.match(/"@cos\/core": "file:/);
  });

  after(() => {
    if (work !== undefined) rmSync(work, { recursive: true, force: true });
  });

  it('the tarballs hold package.json, README.md, the LICENSE and dist/ only (and the CLI launcher in bin/; no source maps: src/ is not shipped), with workspace:* rewritten and no "source" condition', async () => {
    for (const tarball of tarballs) {
      const files = await tarList(tarball);
      expect(files).to.include.members(['package/package.json', 'package/README.md', 'package/LICENSE', 'package/dist/index.js', 'package/dist/index.d.ts']);
      // (@cos/cli also ships its `cos-admin` launcher under bin/.)
      expect(files.filter((f) => !/^package\/(package\.json|README\.md|LICENSE|dist\/.+|bin\/[^/]+\.js)$/.test(f)), tarball).to.deep.equal([]);
      expect(files.filter((f) => f.endsWith('.map')), tarball).to.deep.equal([]);
      const { stdout: index } = await exec('tar', ['xzf', tarball, '-O', 'package/dist/index.js', 'package/dist/index.d.ts']);
      expect(index, tarball).not.to.include('sourceMappingURL');
      const manifest = await tarManifest(tarball);
      expect(JSON.stringify(manifest)).not.to.include('workspace:');
      expect(JSON.stringify(manifest.exports)).not.to.include('source');
      expect(JSON.stringify(manifest.exports)).not.to.include('/src/');
    }
    const koa = await tarManifest(koaTarball);
    expect((koa.dependencies as Record<string, string>)['@cos/core']).to.equal((await tarManifest(coreTarball)).version);
    expect(await tarList(coreTarball)).to.include('package/dist/testing/index.js');
  });

  it('@cos/cli ships the inversify bundle its dist loads, with the bundled packages\' licences; its "imports" map #inversify to it and, for types, to inversify (a dependency, at the bundled version)', async () => {
    const cli = tarballs[PACKAGES.indexOf('cli')]!;
    expect(await tarList(cli)).to.include.members(['package/dist/vendor/inversify.js', 'package/dist/vendor/inversify.LEGAL.txt']);
    const manifest = await tarManifest(cli);
    expect(manifest.imports).to.deep.equal({ '#inversify': { types: 'inversify', default: './dist/vendor/inversify.js' } });
    const { stdout: stamp } = await exec('tar', ['xzf', cli, '-O', 'package/dist/vendor/inversify.json']);
    expect((JSON.parse(stamp) as { packages: string[] }).packages).to.include(`inversify@${(manifest.dependencies as Record<string, string>)['inversify']}`);
  });

  it('the installed cos-admin runs an operator command on the bundle: no file of the inversify packages is loaded', async () => {
    const loads = join(work, 'loads.txt');
    writeFileSync(loads, '');
    const recordLoads = join(ROOT, 'packages', 'cli', 'test', 'fixtures', 'record-loads.mjs');
    const bin = join(scratch, 'node_modules', '@cos', 'cli', 'bin', 'cos-admin.js');
    const env = { ...process.env, DATABASE_URL: `sqlite:${join(work, 'none.sqlite')}`, COS_RECORD_LOADS: loads };
    const failed = await exec(process.execPath, ['--import', recordLoads, bin, 'org', 'list', '--json'], { cwd: scratch, env }).catch((e: { code: number; stderr: string }) => e);
    expect(JSON.parse((failed as { stderr: string }).stderr)).to.include({ error: 'DATABASE_NOT_FOUND' });
    const urls = readFileSync(loads, 'utf8').trim().split('\n');
    expect(urls.filter((u) => u.endsWith('/@cos/cli/dist/vendor/inversify.js'))).to.have.length(1);
    expect(urls.filter((u) => /\/node_modules\/(inversify|@inversifyjs\/[^/]+|reflect-metadata)\//.test(u))).to.deep.equal([]);
  });

  it('a strict TypeScript consumer of @cos/cli gets inversify\'s types for the container (through #inversify), not any', async () => {
    writeFileSync(
      join(scratch, 'consumer-cli.ts'),
      [
        "import { buildContainer, CLI_TOKENS, loadConfig, type ServiceContainer } from '@cos/cli';",
        "import type { Core } from '@cos/core';",
        'type IsAny<T> = 0 extends 1 & T ? true : false;',
        "export const bindIsTyped: IsAny<ServiceContainer['bind']> = false;",
        "export const unbindIsTyped: IsAny<ServiceContainer['unbindAllAsync']> = false;",
        'export async function core(): Promise<Core> {',
        "  const container: ServiceContainer = await buildContainer(loadConfig({ DATABASE_URL: 'sqlite::memory:' }));",
        '  return container.get(CLI_TOKENS.Core);',
        '}',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(scratch, 'tsconfig.cli.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: true, types: [] },
        files: ['consumer-cli.ts'],
      }),
    );
    const result = await exec(process.execPath, [TSC, '-p', 'tsconfig.cli.json'], { cwd: scratch }).catch((e: { stdout: string }) => e);
    expect(result.stdout, 'tsc output').to.equal('');
  });

  for (const example of EXAMPLES) {
    it(`example ${example} runs in the scratch project from the installed tarballs (node --import tsx)`, async () => {
      copyFileSync(join(ROOT, 'examples', example), join(scratch, example));
      const { stdout } = await exec(process.execPath, ['--import', 'tsx', example], { cwd: scratch });
      const out = JSON.parse(stdout) as Record<string, unknown>;
      expect(stdout).not.to.match(RAW_KEY);
      const expected: Record<string, (r: Record<string, unknown>) => void> = {
        '01': (r) => expect(r).to.deep.include({ dialect: 'sqlite', listAsStandardKey: 'FORBIDDEN', afterRevoke: 'UNAUTHORIZED' }),
        '02': (r) => expect(r['created']).to.deep.include({ status: 201, slug: 'tenant-one' }),
        '03': (r) => expect(r['statuses']).to.deep.equal([200, 200, 429, 200, 401]),
        '04': (r) => expect(r['reportWithScope']).to.deep.include({ status: 200 }),
      };
      expected[example.slice(0, 2)]!(out);
    });
  }

  it('the four examples are the files docs/embedding.md includes', () => {
    expect(EXAMPLES.map((f) => f.slice(0, 2))).to.deep.equal(['01', '02', '03', '04']);
    for (const f of EXAMPLES) expect(readFileSync(GUIDE, 'utf8')).to.include(`<!-- example: examples/${f} -->`);
  });

  it('npm installs one @cos/core, shared by @cos/adapter-koa', () => {
    const lock = JSON.parse(readFileSync(join(scratch, 'package-lock.json'), 'utf8')) as { packages: Record<string, unknown> };
    const cores = Object.keys(lock.packages).filter((p) => p.endsWith('node_modules/@cos/core'));
    expect(cores).to.deep.equal(['node_modules/@cos/core']);
  });

  it('C-22, C-30, C-36: an ESM script importing @cos/core and @cos/core/testing issues a key, authenticates it and rejects it once revoked', async () => {
    writeFileSync(join(scratch, 'smoke-core.mjs'), SMOKE_CORE);
    const { stdout } = await exec(process.execPath, ['smoke-core.mjs'], { cwd: scratch });
    const out = JSON.parse(stdout) as {
      principal: { kind: string; organisationId: string; isPlatform: boolean; keyPrefix: string };
      orgId: string;
      key: Record<string, unknown>;
      rawKeyShape: boolean;
      afterRevoke: string;
      health: string;
    };
    expect(out.rawKeyShape).to.equal(true);
    expect(out.principal).to.deep.equal({ kind: 'api_key', organisationId: out.orgId, isPlatform: false, keyPrefix: out.key['key_prefix'] });
    expect(out.key).to.include({ organisation_id: out.orgId, label: 'from a tarball', is_active: true, status: 'active' });
    expect(out.key).not.to.have.property('key');
    expect(out.afterRevoke).to.equal('UNAUTHORIZED');
    expect(out.health).to.equal('ok');
    expect(stdout).not.to.match(RAW_KEY);
  });

  it('C-3: @cos/adapter-koa from its tarball serves /v1 over the packed core', async () => {
    writeFileSync(join(scratch, 'smoke-koa.mjs'), SMOKE_KOA);
    const { stdout } = await exec(process.execPath, ['smoke-koa.mjs'], { cwd: scratch });
    const out = JSON.parse(stdout) as { version: Record<string, string>; own: { status: number; body: { slug: string } } };
    expect(out.version).to.deep.equal({ api_version: 'v1', release: 'v1-stable', released_on: '2026-06-10', service_version: '0.1.0' });
    expect(out.own.status).to.equal(200);
    expect(out.own.body.slug).to.equal('packed');
  });

  it('@cos/core/testing loads in a project without chai or mocha; only @cos/core/testing/contracts needs chai', async () => {
    const probe = [
      "const testing = await import('@cos/core/testing');",
      "console.log('testing', typeof testing.createInMemoryStore, typeof testing.FakeClock, 'describeStoreContract' in testing);",
      "try { await import('@cos/core/testing/contracts'); console.log('contracts resolved'); } catch (e) { console.log('contracts', e.code, /'chai'/.test(e.message)); }",
    ].join('\n');
    writeFileSync(join(scratch, 'testing-probe.mjs'), probe);
    const { stdout } = await exec(process.execPath, ['testing-probe.mjs'], { cwd: scratch });
    expect(stdout.trim().split('\n')).to.deep.equal(['testing function function false', 'contracts ERR_MODULE_NOT_FOUND true']);
  });

  it('only the declared entry points resolve: deep imports are refused, even under --conditions=source', async () => {
    const probe = [
      "for (const s of ['@cos/core/dist/core.js', '@cos/core/src/index.ts', '@cos/adapter-koa/dist/app.js']) {",
      '  try { await import(s); console.log(s, "resolved"); } catch (e) { console.log(s, e.code); }',
      '}',
      "const { createCore } = await import('@cos/core');",
      "console.log('entry', typeof createCore);",
    ].join('\n');
    writeFileSync(join(scratch, 'probe.mjs'), probe);
    const { stdout } = await exec(process.execPath, ['--conditions=source', 'probe.mjs'], { cwd: scratch });
    expect(stdout.trim().split('\n')).to.deep.equal([
      '@cos/core/dist/core.js ERR_PACKAGE_PATH_NOT_EXPORTED',
      '@cos/core/src/index.ts ERR_PACKAGE_PATH_NOT_EXPORTED',
      '@cos/adapter-koa/dist/app.js ERR_PACKAGE_PATH_NOT_EXPORTED',
      'entry function',
    ]);
  });

  it('a strict NodeNext TypeScript consumer type-checks against the shipped declarations, third-party ones included', async () => {
    writeFileSync(join(scratch, 'consumer.ts'), CONSUMER_TS);
    writeFileSync(
      join(scratch, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: [],
        },
        files: ['consumer.ts'],
      }),
    );
    const result = await exec(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: scratch }).catch(
      (e: { stdout: string; code: number }) => e,
    );
    expect(result.stdout, 'tsc output').to.equal('');
  });
});
