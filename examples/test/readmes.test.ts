/**
 * The runnable TypeScript example of each package README (the block after a
 * `<!-- runnable: examples/test/readmes.test.ts -->` line) is a complete program: it type-checks
 * against the packages' public declarations and runs, printing what its comments say.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';

const exec = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** What each README's example prints (its comments say so too). */
const EXPECTED: Record<string, RegExp> = {
  core: /^\[ 'svc_live_[A-Za-z0-9]{3}' \]\ntrue\n$/,
  'store-sql': /^0001_initial 0002_leaked_keys 0003_key_lifecycle 0004_operator_audit 0005_instance_registry 0006_delivery_per_endpoint 0007_webhook_at_rest 0008_least_privilege 0009_audit_chain 0010_idempotency_keys 0011_webhook_overlap 0012_audit_rare_kind_index 0013_redis_identity 0014_audit_seq_checks 0015_organisation_rate_limit 0016_key_usage 0017_key_metadata_cidrs 0018_expiry_notices 0019_key_rate_limit\nacme\n$/,
  'adapter-koa': /^200 \{\n {2}api_version: 'v1',\n {2}release: 'v1-stable',\n {2}released_on: '2026-06-10',\n {2}service_version: '1\.0\.0'\n\}\n$/,
  cli: /^acme\n$/,
};

/** The ts blocks marked runnable (other blocks of a README may be fragments). */
function runnableBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^<!-- runnable: examples\/test\/readmes\.test\.ts -->\n```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

describe('package READMEs: the examples compile and run', function () {
  this.timeout(90_000);
  let dir: string;
  const files: Record<string, string> = {};

  before(async () => {
    // Inside examples/ so that the @cos packages resolve as they do for the examples.
    dir = mkdtempSync(join(ROOT, 'examples', '.readme-'));
    for (const pkg of Object.keys(EXPECTED)) {
      const blocks = runnableBlocks(readFileSync(join(ROOT, 'packages', pkg, 'README.md'), 'utf8'));
      expect(blocks, `${pkg}/README.md has one runnable ts example`).to.have.length(1);
      files[pkg] = join(dir, `${pkg}.ts`);
      writeFileSync(files[pkg], blocks[0]!);
    }
    await exec(process.execPath, [TSC, '-b'], { cwd: ROOT });
  });

  after(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('type-check under the workspace\'s strict settings against the built declarations', async () => {
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        extends: '../../tsconfig.base.json',
        compilerOptions: { noEmit: true, composite: false, incremental: false, declaration: false, declarationMap: false },
        files: Object.keys(EXPECTED).map((pkg) => `${pkg}.ts`),
      }),
    );
    const result = await exec(process.execPath, [TSC, '-p', join(dir, 'tsconfig.json')], { cwd: ROOT }).catch(
      (e: { stdout: string }) => e,
    );
    expect(result.stdout, 'tsc output').to.equal('');
  });

  for (const pkg of Object.keys(EXPECTED)) {
    it(`${pkg}/README.md: the example runs and prints what it says`, async () => {
      const { stdout } = await exec(process.execPath, ['--import', 'tsx', '--conditions=source', files[pkg]!], {
        cwd: ROOT,
        timeout: 60_000,
      });
      expect(stdout).to.match(EXPECTED[pkg]!);
    });
  }
});
