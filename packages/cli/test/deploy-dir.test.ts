/**
 * The production directory (`npx -y pnpm@10 deploy:dir OUT`, scripts/deploy-dir.mjs), as an adopter
 * uses it: built once, moved elsewhere (outside the workspace, so nothing resolves from it), then its
 * `bin/cos-admin` runs migrate, bootstrap and serve on SQLite and on Postgres + Redis, and the served
 * API issues a key, authenticates it, revokes it and answers 401 at once. The directory holds no
 * devDependency of the workspace and carries a CycloneDX SBOM and the licences.
 *
 * Build time: the deploy itself is a few seconds (pnpm copies from its store, better-sqlite3's addon
 * from the store's side-effects cache); `pnpm build` before it is a no-op after ensureBuilt.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { childEnv, ensureBuilt, jsonLines, printedKeys, ROOT, tempDir, type Env } from './support/cli.js';
import { databaseTargets, type TestDatabase } from './support/databases.js';
import { DEPLOY_BIN, DEPLOY_COMMAND, DEPLOY_LICENSE, DEPLOY_SBOM } from './support/deploy.js';

const exec = promisify(execFile);
const WORKSPACE_MANIFESTS = ['package.json', 'examples/package.json', ...readdirSync(join(ROOT, 'packages')).map((p) => `packages/${p}/package.json`)].filter((p) =>
  existsSync(join(ROOT, p)),
);
/** The packages the directory deploys: @cos/cli and the workspace packages it depends on. */
const DEPLOYED = ['cli', 'core', 'adapter-koa', 'store-sql', 'limiter-redis', 'webhook-sender'];

interface Manifest {
  name?: string;
  version?: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}
const manifest = (path: string): Manifest => JSON.parse(readFileSync(path, 'utf8')) as Manifest;

/** Every package installed under `dir`/node_modules, nested ones included, by name. */
function installedPackages(dir: string): Set<string> {
  const names = new Set<string>();
  const walk = (nodeModules: string): void => {
    if (!existsSync(nodeModules)) return;
    for (const entry of readdirSync(nodeModules)) {
      if (entry.startsWith('.')) continue;
      const scoped = entry.startsWith('@') ? readdirSync(join(nodeModules, entry)).map((e) => `${entry}/${e}`) : [entry];
      for (const name of scoped) {
        const pkg = join(nodeModules, name);
        if (!existsSync(join(pkg, 'package.json'))) continue;
        names.add(name);
        walk(join(pkg, 'node_modules'));
      }
    }
  };
  walk(join(dir, 'node_modules'));
  return names;
}

/** Every symbolic link under `dir` whose target resolves outside `dir`. */
function linksLeaving(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isSymbolicLink()) {
        const target = resolve(d, readlinkSync(path));
        if (!target.startsWith(`${dir}/`)) out.push(`${path} -> ${target}`);
      } else if (entry.isDirectory()) walk(path);
    }
  };
  walk(dir);
  return out;
}

interface Served {
  child: ChildProcess;
  api: string;
  ops: string;
  output(): string;
  /** Milliseconds from the spawn to the first 200 of /readyz. */
  readyMs: number;
}

async function until<T>(what: () => Promise<T | undefined> | T | undefined, ms: number, label: string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await what();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(label);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Starts `bin/cos-admin serve` of the moved directory and waits (bounded) for /readyz 200. */
async function serve(bin: string, env: Env, cwd: string): Promise<Served> {
  const started = Date.now();
  const child = spawn(bin, ['serve'], { cwd, env: childEnv({ ...env, PORT: '0', OPS_PORT: '0' }), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const line = await until(
    () => {
      if (child.exitCode !== null) throw new Error(`serve exited (${child.exitCode}) before listening:\n${out}`);
      return jsonLines(out).find((l) => typeof l['address'] === 'string' && typeof l['ops'] === 'string');
    },
    60_000,
    `serve did not listen within 60 s:\n${out}`,
  );
  const ops = line['ops'] as string;
  await until(async () => ((await fetch(`${ops}/readyz`).catch(() => undefined))?.status === 200 ? true : undefined), 30_000, `/readyz did not answer 200:\n${out}`);
  return { child, api: line['address'] as string, ops, output: () => out, readyMs: Date.now() - started };
}

async function stop(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const code = await exited;
  clearTimeout(timer);
  return code;
}

describe('C-180, C-181: the production directory (deploy:dir), moved away from the workspace', function () {
  this.timeout(60_000);
  const tmp = tempDir('cos-deploy-');
  const staged = join(tmp.dir, 'build', 'out');
  const app = join(tmp.dir, 'elsewhere', 'app');
  const bin = join(app, DEPLOY_BIN);
  let buildOutput = '';

  before(async function () {
    this.timeout(300_000);
    await ensureBuilt(); // under the build lock the other CLI tests share: deploy:dir's build then finds nothing to do
    mkdirSync(join(tmp.dir, 'build'));
    const { stdout } = await exec('bash', ['-c', `${DEPLOY_COMMAND} "$1"`, 'deploy', staged], { cwd: ROOT, env: childEnv({}), maxBuffer: 16 * 1024 * 1024, timeout: 290_000 });
    buildOutput = stdout;
    mkdirSync(join(tmp.dir, 'elsewhere'));
    renameSync(staged, app);
  });

  after(() => tmp.remove());

  it('says where it wrote the directory and its size; the directory has bin/cos-admin (executable), the SBOM and the licence', () => {
    expect(buildOutput).to.match(/deploy:dir: \S+ \(\d+ MiB\) in [\d.]+ s/);
    const size = /\((\d+) MiB\)/.exec(buildOutput)![1];
    console.log(`      (production directory: ${size} MiB)`);
    expect(statSync(bin).mode & 0o111, 'executable').to.not.equal(0);
    expect(lstatSync(bin).isSymbolicLink() ? readlinkSync(bin) : 'a file').to.not.match(/^\//);
    expect(readFileSync(join(app, DEPLOY_LICENSE), 'utf8')).to.equal(readFileSync(join(ROOT, 'LICENSE'), 'utf8'));
    expect(existsSync(join(app, 'pnpm-lock.yaml')), 'no workspace lockfile').to.equal(false);
  });

  it('C-180: nothing in it links outside it, and nothing of the TypeScript sources is shipped', () => {
    expect(linksLeaving(app)).to.deep.equal([]);
    const cos = readdirSync(join(app, 'node_modules', '@cos')).sort();
    expect(cos).to.deep.equal(DEPLOYED.filter((p) => p !== 'cli').sort());
    for (const p of [app, ...cos.map((c) => join(app, 'node_modules', '@cos', c))]) {
      expect(readdirSync(p).filter((f) => !['dist', 'bin', 'node_modules', 'package.json', 'README.md', DEPLOY_LICENSE, DEPLOY_SBOM].includes(f)), p).to.deep.equal([]);
    }
  });

  it('C-181: OUT/node_modules holds no devDependency of the workspace (typescript, tsx, mocha, esbuild, knip, @types/* and the rest)', () => {
    const production = new Set(DEPLOYED.flatMap((p) => Object.keys(manifest(join(ROOT, 'packages', p, 'package.json')).dependencies ?? {})));
    const dev = new Set(WORKSPACE_MANIFESTS.flatMap((m) => Object.keys(manifest(join(ROOT, m)).devDependencies ?? {})).filter((d) => !production.has(d)));
    for (const named of ['typescript', 'tsx', 'mocha', 'esbuild', 'knip', 'chai']) expect(dev.has(named), named).to.equal(true);
    const installed = installedPackages(app);
    expect(installed.size).to.be.greaterThan(50);
    expect(installed.has('better-sqlite3') && installed.has('knex') && installed.has('koa') && installed.has('redis') && installed.has('pg')).to.equal(true);
    // Type declarations are for compiling, never for running: no @types/* either, whoever declares it.
    expect([...installed].filter((n) => dev.has(n) || n.startsWith('@types/')).sort()).to.deep.equal([]);
  });

  it('C-181: sbom.cdx.json is a CycloneDX SBOM of exactly what is installed, every component with its licence', () => {
    const sbom = JSON.parse(readFileSync(join(app, DEPLOY_SBOM), 'utf8')) as {
      bomFormat: string;
      specVersion: string;
      metadata: { component: { name: string; group?: string; type: string; version: string }; tools: unknown };
      components: { name: string; group?: string; version: string; licenses?: unknown[] }[];
    };
    expect(sbom.bomFormat).to.equal('CycloneDX');
    expect(Number(sbom.specVersion)).to.be.at.least(1.5);
    expect(sbom.metadata.component).to.include({ group: '@cos', name: 'cli', type: 'application', version: manifest(join(ROOT, 'packages/cli/package.json')).version! });
    expect(JSON.stringify(sbom.metadata.tools)).to.include('cyclonedx-npm');
    const names = new Set(sbom.components.map((c) => (c.group ? `${c.group}/${c.name}` : c.name)));
    expect([...installedPackages(app)].filter((n) => !names.has(n)), 'installed but not in the SBOM').to.deep.equal([]);
    expect([...names].filter((n) => !installedPackages(app).has(n)), 'in the SBOM but not installed').to.deep.equal([]);
    expect(sbom.components.filter((c) => !Array.isArray(c.licenses) || c.licenses.length === 0).map((c) => c.name)).to.deep.equal([]);
  });

  for (const target of databaseTargets()) {
    describe(`C-180: migrate, bootstrap and serve from the moved directory on ${target.name}${target.name === 'Postgres' ? ' + Redis' : ''}`, () => {
      let db: TestDatabase | undefined;
      let env: Env = {};
      let served: Served | undefined;

      before(async function () {
        if (target.name === 'Postgres') {
          const redis = process.env['TEST_REDIS_URL'];
          if (redis === undefined || redis === '') {
            if (process.env['CI'] === 'true') throw new Error('CI=true but TEST_REDIS_URL is not set: the Redis suites must run in CI');
            this.skip();
          }
          env = { REDIS_URL: redis! };
        }
        db = await target.create();
        env = { ...env, DATABASE_URL: db.databaseUrl };
      });

      after(async () => {
        if (served !== undefined) await stop(served.child);
        await db?.drop();
      });

      it('issues a key, authenticates it, revokes it and answers 401 at once; serve stops on SIGTERM with status 0', async () => {
        const migrate = await exec(bin, ['migrate'], { cwd: db!.cwd, env: childEnv(env) });
        expect(migrate.stdout).to.match(/Applied \d+ migrations/);
        const boot = await exec(bin, ['bootstrap', '--json'], { cwd: db!.cwd, env: childEnv(env) });
        const platformKey = printedKeys(boot.stdout)[0]!;
        expect(platformKey).to.be.a('string');
        served = await serve(bin, env, db!.cwd);
        console.log(`      (${target.name}: serve ready in ${served.readyMs} ms)`);
        const call = async (method: string, path: string, key: string, body?: unknown): Promise<{ status: number; json: any }> => {
          const res = await fetch(`${served!.api}/v1${path}`, {
            method,
            headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          });
          const text = await res.text();
          return { status: res.status, json: text === '' ? null : JSON.parse(text) };
        };
        const org = await call('POST', '/organisations', platformKey, { name: 'Deployed Ltd', slug: 'deployed' });
        expect(org.status).to.equal(201);
        const issued = await call('POST', `/organisations/${org.json.id}/api-keys`, platformKey, { label: 'from the production directory' });
        expect(issued.status).to.equal(201);
        const own = await call('GET', `/organisations/${org.json.id}`, issued.json.key);
        expect(own.status).to.equal(200);
        expect(own.json).to.include({ slug: 'deployed' });
        expect((await call('DELETE', `/organisations/${org.json.id}/api-keys/${issued.json.id}`, issued.json.key)).status).to.equal(204);
        const after = await call('GET', `/organisations/${org.json.id}`, issued.json.key);
        expect(after).to.deep.equal({ status: 401, json: { error: 'UNAUTHORIZED', message: 'Missing or invalid API key', details: [] } });
        expect(served.output()).not.to.include(issued.json.key);
        expect(await stop(served.child)).to.equal(0);
      });
    });
  }
});
