/**
 * The built CLI loads inversify from one bundled file (dist/vendor/inversify.js, made by
 * scripts/bundle-inversify.mjs after `tsc -b`): package.json's "imports" maps `#inversify` to it,
 * and to the inversify package itself under the "source" condition the tests run with. A bundle
 * that is missing or made from other versions than those installed is found stale, so the launcher
 * and the build make it again.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { BUNDLE, bundleStaleness, installedPackages } from '../scripts/bundle-inversify.mjs';
import { childEnv, ensureBuilt, MAIN_DIST, ROOT, tempDir } from './support/cli.js';

const CLI = join(ROOT, 'packages/cli');
const RECORD_LOADS = fileURLToPath(new URL('./fixtures/record-loads.mjs', import.meta.url));
/** A file of inversify or of a package only it brings, loaded from node_modules. */
const INVERSIFY_FILE = /\/node_modules\/(inversify|@inversifyjs\/[^/]+|reflect-metadata)\//;

describe('inversify bundled into the built CLI', () => {
  const tmp = tempDir('cos-inversify-bundle-');
  after(() => tmp.remove());
  before(() => ensureBuilt());

  it('an operator command of the built CLI loads dist/vendor/inversify.js and no file of the inversify packages', async () => {
    const loads = join(tmp.dir, 'loads.txt');
    writeFileSync(loads, '');
    const env = childEnv({ DATABASE_URL: `sqlite:${join(tmp.dir, 'none.sqlite')}`, COS_RECORD_LOADS: loads });
    // `org list` builds the command's container before it finds the database missing.
    const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(process.execPath, ['--import', RECORD_LOADS, MAIN_DIST, 'org', 'list', '--json'], { cwd: tmp.dir, env }, (error, _stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stderr }),
      );
    });
    expect(result.code, result.stderr).to.equal(1);
    expect(JSON.parse(result.stderr)).to.include({ error: 'DATABASE_NOT_FOUND' });
    const urls = readFileSync(loads, 'utf8').trim().split('\n');
    expect(urls).to.include.members([`file://${CLI}/dist/container.js`, `file://${CLI}/${BUNDLE}`]);
    expect(urls.filter((u) => INVERSIFY_FILE.test(u))).to.deep.equal([]);
  });

  it('under the "source" condition (tests, tsx) #inversify is the inversify package', () => {
    expect(import.meta.resolve('#inversify')).to.match(/\/node_modules\/inversify\/lib\/index\.js$/);
  });

  it('the bundle is current, of the inversify version package.json pins, and ships the licence of every package in it', () => {
    expect(bundleStaleness()).to.equal(null);
    // The declarations embedders compile against come from the dependency: the same version as the code that runs.
    const declared = (JSON.parse(readFileSync(join(CLI, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies['inversify'];
    expect(declared).to.match(/^\d+\.\d+\.\d+$/);
    expect(JSON.parse(readFileSync(join(CLI, 'dist/vendor/inversify.json'), 'utf8'))).to.have.property('packages').that.includes(`inversify@${declared}`);
    const licences = readFileSync(join(CLI, 'dist/vendor/inversify.LEGAL.txt'), 'utf8');
    const sections = licences.split(/\n-{72}\n\n/);
    const section = (pkg: string): string => sections.find((s) => s.startsWith(`${pkg}@`)) ?? '';
    const inversify = installedPackages().find((p) => p.startsWith('inversify@'));
    expect(sections[0]).to.include(`- ${inversify}\n`);
    expect(section('inversify')).to.match(/^inversify@\S+ \(MIT\)\n\n.*MIT License/);
    expect(section('@inversifyjs/core')).to.include('MIT License');
    // reflect-metadata (inversify's reflect-metadata/lite is bundled too): its notice and its licence.
    expect(section('reflect-metadata')).to.match(/^reflect-metadata@\S+ \(Apache-2\.0\)/).and.to.include('Copyright (c) Microsoft').and.to.include('Apache License');
  });

  describe('stale when missing or made from other versions (a scratch package tree)', () => {
    const root = join(tmp.dir, 'tree');
    const cli = join(root, 'packages/cli');
    const manifest = (dir: string, name: string, version: string, dependencies: Record<string, string> = {}): void => {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, version, dependencies }));
    };

    before(() => {
      manifest(cli, '@cos/cli', '0.1.0', { inversify: '^8' });
      manifest(join(root, 'node_modules/inversify'), 'inversify', '8.2.3', { '@inversifyjs/core': '15.0.1' });
      manifest(join(root, 'node_modules/@inversifyjs/core'), '@inversifyjs/core', '15.0.1');
    });

    it('no bundle, then a bundle and its stamp from the installed versions, then an upgrade of a package inversify depends on, then no stamp', () => {
      expect(bundleStaleness(cli)).to.equal(`${BUNDLE} is missing`);
      mkdirSync(join(cli, 'dist/vendor'), { recursive: true });
      writeFileSync(join(cli, BUNDLE), '');
      expect(installedPackages(cli)).to.deep.equal(['@inversifyjs/core@15.0.1', 'inversify@8.2.3']);
      writeFileSync(join(cli, 'dist/vendor/inversify.json'), JSON.stringify({ packages: installedPackages(cli) }));
      expect(bundleStaleness(cli)).to.equal(null);
      manifest(join(root, 'node_modules/@inversifyjs/core'), '@inversifyjs/core', '15.1.0');
      expect(bundleStaleness(cli)).to.equal(`${BUNDLE} was made from other versions (installed now: @inversifyjs/core@15.1.0)`);
      rmSync(join(cli, 'dist/vendor/inversify.json'));
      expect(bundleStaleness(cli)).to.equal(`${BUNDLE} is missing`);
    });
  });
});
