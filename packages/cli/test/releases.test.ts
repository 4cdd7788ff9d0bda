/**
 * Releases: the six publishable `@cos` packages are versioned together with changesets (one fixed
 * group, one version), each keeps a CHANGELOG.md whose latest entry is its version, and
 * `pnpm publish -r --dry-run` publishes exactly them, cleanly.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { childEnv, ensureBuilt, ROOT } from './support/cli.js';

const exec = promisify(execFile);

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
}

const workspace: { dir: string; manifest: Manifest }[] = [
  ...readdirSync(join(ROOT, 'packages')).map((p) => join(ROOT, 'packages', p)),
  join(ROOT, 'examples'),
].map((dir) => ({ dir, manifest: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest }));
const publishable = workspace.filter((w) => w.manifest.private !== true);

/** An environment without the npm_config_* variables a package manager's script run carries. */
function withoutNpmConfig(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !/^npm_config_/i.test(name)));
}

describe('C-185: releases: one changesets version for the six @cos packages, a CHANGELOG each, a clean publish dry run', function () {
  this.timeout(120_000);

  it('the fixed group of .changeset/config.json is exactly the publishable packages; private ones are never versioned', () => {
    const config = JSON.parse(readFileSync(join(ROOT, '.changeset', 'config.json'), 'utf8')) as { fixed: string[][]; privatePackages: unknown; access: string };
    expect(publishable.map((w) => w.manifest.name).sort()).to.deep.equal(['@cos/adapter-koa', '@cos/cli', '@cos/core', '@cos/limiter-redis', '@cos/store-sql', '@cos/webhook-sender']);
    expect(config.fixed).to.have.length(1);
    expect([...config.fixed[0]!].sort()).to.deep.equal(publishable.map((w) => w.manifest.name).sort());
    expect(config.privatePackages).to.deep.equal({ version: false, tag: false });
    expect(config.access).to.equal('public');
  });

  it('the six share one version, and each CHANGELOG.md begins with that version', () => {
    const versions = new Set(publishable.map((w) => w.manifest.version));
    expect(versions.size).to.equal(1);
    for (const { dir, manifest } of publishable) {
      const changelog = readFileSync(join(dir, 'CHANGELOG.md'), 'utf8');
      expect(changelog.startsWith(`# ${manifest.name}\n`), `${manifest.name}/CHANGELOG.md title`).to.equal(true);
      expect(/^## (\S+)$/m.exec(changelog)?.[1], `${manifest.name}: latest CHANGELOG entry`).to.equal(manifest.version);
    }
  });

  it('`pnpm publish -r --dry-run` publishes exactly the six at that version, with no warning but the dry run\'s missing login', async function () {
    this.timeout(240_000);
    await ensureBuilt(); // every package's dist/ (the CLI's references), under the build lock
    const { stdout, stderr } = await exec('bash', ['-c', 'npx -y pnpm@10 publish -r --dry-run --no-git-checks'], {
      cwd: ROOT,
      // Without the npm_config_* settings `pnpm test` hands its scripts (verify-deps-before-run): npm,
      // which the publish runs, warns about each one it does not know.
      env: { ...withoutNpmConfig(childEnv({})), npm_config_audit: 'false', npm_config_fund: 'false' },
      maxBuffer: 16 * 1024 * 1024,
      timeout: 230_000,
    });
    const output = `${stdout}\n${stderr}`;
    const published = [...output.matchAll(/^\+ (@cos\/[a-z-]+)@(\S+)$/gm)].map((m) => `${m[1]}@${m[2]}`).sort();
    expect(published).to.deep.equal(publishable.map((w) => `${w.manifest.name}@${w.manifest.version}`).sort());
    // npm's and pnpm's warning and error lines (not file names such as dist/errors.js in the listing).
    const problems = output.split('\n').filter((l) => /^(npm (warn|error|ERR!)|\s*(WARN|ERROR|ERR_PNPM\w*)\b)/.test(l) && !/requires you to be logged in to .* \(dry-run\)$/.test(l));
    expect(output.split('\n').filter((l) => /^npm warn/.test(l))).to.have.length(publishable.length); // the login notice, once per package: the filter sees them
    expect(problems).to.deep.equal([]);
  });
});
