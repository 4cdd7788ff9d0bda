#!/usr/bin/env node
// `pnpm cos-admin …` (and `pnpm start`) from a clone. The root package links this file as its
// `cos-admin` bin, so pnpm runs it as a binary (`pnpm exec`): no script header on stdout (which
// would break `--json`), pnpm's own errors visible, the exit status passed through.
//
// It builds only when needed: when a package's sources (or its tsconfig.json / package.json, or
// tsconfig.base.json) are newer than that package's tsconfig.tsbuildinfo, it runs `tsc -b --verbose
// packages/cli` with its progress on stderr (stdout stays the command's own). The built CLI loads
// inversify from one bundled file that tsc does not make (dist/vendor/inversify.js,
// packages/cli/scripts/bundle-inversify.mjs): when it is missing (a `tsc -b` alone finds dist up to
// date without it), older than its script or made from other versions than those installed, it is
// bundled again, also on stderr. Otherwise, and after a build, it runs packages/cli/dist/main.js in
// this same process (no second Node start-up).
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BUNDLE, bundleStaleness } from '../../packages/cli/scripts/bundle-inversify.mjs';
import { markBuilt, staleness } from './stale.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

const reason = staleness(ROOT);
if (reason !== null) {
  process.stderr.write(`cos-admin: building (${reason})…\n`);
  const tsc = createRequire(join(ROOT, 'package.json')).resolve('typescript/bin/tsc');
  const build = spawnSync(process.execPath, [tsc, '-b', '--verbose', 'packages/cli'], { cwd: ROOT, stdio: ['ignore', 2, 2] });
  if (build.status !== 0) {
    process.stderr.write(`cos-admin: the build failed (tsc -b exited ${build.status ?? build.signal}); nothing was run\n`);
    process.exit(1);
  }
  markBuilt(ROOT);
  process.stderr.write('cos-admin: built.\n');
}

if (bundleStaleness() !== null) {
  // The bundler says why and what it made (its stdout goes to stderr here too).
  const bundler = join(ROOT, 'packages/cli/scripts/bundle-inversify.mjs');
  const bundle = spawnSync(process.execPath, [bundler], { cwd: ROOT, stdio: ['ignore', 2, 2] });
  if (bundle.status !== 0) {
    process.stderr.write(`cos-admin: making packages/cli/${BUNDLE} failed (exited ${bundle.status ?? bundle.signal}); nothing was run\n`);
    process.exit(1);
  }
}

await import(pathToFileURL(join(ROOT, 'packages/cli/dist/main.js')).href);
