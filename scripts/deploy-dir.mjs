#!/usr/bin/env node
/**
 * `npx -y pnpm@10 deploy:dir OUT` (after `pnpm build`, which the root script runs first): writes a
 * self-contained, relocatable production directory of the service to OUT.
 *
 * - `pnpm deploy --prod` of @cos/cli does the copying: the CLI package's published files at OUT,
 *   the workspace packages it depends on injected as copies of their published files (dist, no
 *   sources, no source maps), and the production dependencies at the versions of pnpm-lock.yaml,
 *   from pnpm's store (better-sqlite3's compiled addon comes from the store's side-effects cache,
 *   so nothing compiles when the workspace's install already built it). The node_modules layout is
 *   npm's flat one (`node-linker=hoisted`): no symlinks, so OUT can be moved, copied into an image
 *   or archived as it is, and npm-based tools read it.
 * - OUT/bin/cos-admin is a relative symlink to the CLI's bin script beside it, so it works from
 *   wherever OUT lies (node resolves a symlinked main module to its real path).
 * - OUT/sbom.cdx.json is a CycloneDX SBOM of OUT made by @cyclonedx/cyclonedx-npm (production
 *   components only, each with its declared licence and, as evidence, its licence text).
 *   `--ignore-npm-errors` because pnpm writes the injected packages' specifiers into OUT/package.json
 *   as `file:` URLs of the build machine, which `npm ls` reports as invalid (and peer
 *   `@types/koa`, a compile-time peer of @cos/adapter-koa, as missing); the tree itself is complete.
 * - OUT/LICENSE is the service's licence; every dependency keeps its own licence file in
 *   node_modules, and the CLI's inversify bundle carries dist/vendor/inversify.LEGAL.txt.
 * - OUT/pnpm-lock.yaml, which pnpm deploy writes, is removed: it lists the whole workspace's
 *   packages (development tools included) with build-machine paths, and the SBOM is the inventory.
 *
 * OUT must not exist or be empty. Nothing is written to the workspace.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function fail(message) {
  process.stderr.write(`deploy:dir: ${message}\n`);
  process.exit(2);
}

const args = process.argv.slice(2).filter((a) => a !== '--');
if (args.length !== 1 || args[0].startsWith('-')) fail('usage: npx -y pnpm@10 deploy:dir OUT (one directory, which must not exist or be empty)');
const out = resolve(process.env.INIT_CWD ?? process.cwd(), args[0]);
if (existsSync(out) && (!statSync(out).isDirectory() || readdirSync(out).length > 0)) fail(`${out} exists and is not an empty directory`);
if (out === ROOT || out.startsWith(`${ROOT}/packages/`) || out.startsWith(`${ROOT}/node_modules/`)) fail(`${out} is inside the workspace's packages; choose a directory outside them`);
if (!existsSync(join(ROOT, 'packages/cli/dist/main.js')) || !existsSync(join(ROOT, 'packages/cli/dist/vendor/inversify.js'))) {
  fail('packages/cli is not built: run it as `npx -y pnpm@10 deploy:dir OUT`, which builds first');
}

/** pnpm itself: the one running this script when started through a root script, else `pnpm` on the PATH. */
function pnpm(argv, options) {
  const execpath = process.env.npm_execpath;
  if (execpath !== undefined && /pnpm/.test(execpath)) {
    return execFileSync(/\.[cm]?js$/.test(execpath) ? process.execPath : execpath, /\.[cm]?js$/.test(execpath) ? [execpath, ...argv] : argv, options);
  }
  return execFileSync('pnpm', argv, options);
}

/** The environment without what pnpm sets for a script it runs (npm_execpath would make npm-based tools run pnpm). */
function withoutPnpm(env) {
  return Object.fromEntries(Object.entries(env).filter(([k]) => k !== 'npm_execpath' && k !== 'npm_node_execpath' && !k.startsWith('npm_config_') && !k.startsWith('npm_package_') && !k.startsWith('npm_lifecycle_')));
}

const started = Date.now();
pnpm(
  ['--filter', '@cos/cli', 'deploy', '--prod', '--config.inject-workspace-packages=true', '--config.node-linker=hoisted', '--config.reporter=silent', out],
  { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] },
);
rmSync(join(out, 'pnpm-lock.yaml'), { force: true });
symlinkSync('cos-admin.js', join(out, 'bin', 'cos-admin'));
copyFileSync(join(ROOT, 'LICENSE'), join(out, 'LICENSE'));

execFileSync(
  'cyclonedx-npm', // the workspace's devDependency: pnpm puts node_modules/.bin on a root script's PATH
  [
    '--ignore-npm-errors',
    '--omit', 'dev',
    '--omit', 'peer',
    '--flatten-components',
    '--gather-license-texts',
    '--output-reproducible',
    '--mc-type', 'application',
    '--output-format', 'JSON',
    '--output-file', join(out, 'sbom.cdx.json'),
    join(out, 'package.json'),
  ],
  // The tool runs `npm ls`, which only reads OUT/node_modules: offline, so no registry is asked.
  // Without npm_execpath (pnpm's own, under a root script) it finds npm on the PATH.
  { cwd: out, stdio: ['ignore', 'ignore', 'ignore'], env: { ...withoutPnpm(process.env), npm_config_offline: 'true' } },
);

const kib = Number(execFileSync('du', ['-sk', out], { encoding: 'utf8' }).split('\t')[0]);
process.stdout.write(`deploy:dir: ${out} (${(kib / 1024).toFixed(0)} MiB) in ${((Date.now() - started) / 1000).toFixed(1)} s; run ${join(out, 'bin', 'cos-admin')} migrate, then serve\n`);
