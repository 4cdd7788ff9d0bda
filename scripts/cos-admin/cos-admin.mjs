#!/usr/bin/env node
// `pnpm cos-admin …` (and `pnpm start`) from a clone. The root package links this file as its
// `cos-admin` bin, so pnpm runs it as a binary (`pnpm exec`): no script header on stdout (which
// would break `--json`), pnpm's own errors visible, the exit status passed through.
//
// It builds only when needed: when a package's sources (or its tsconfig.json / package.json, or
// tsconfig.base.json) are newer than that package's tsconfig.tsbuildinfo, it runs `tsc -b --verbose
// packages/cli` with its progress on stderr (stdout stays the command's own). Otherwise, and after
// a build, it runs packages/cli/dist/main.js in this same process (no second Node start-up).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** The packages `tsc -b packages/cli` builds (packages/cli/tsconfig.json's references, and cli). */
const PACKAGES = ['core', 'store-sql', 'limiter-redis', 'adapter-koa', 'webhook-sender', 'cli'];

/** Newest modification time under `path`: files and directories (a deleted file changes its directory). */
function newest(path) {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return 0;
  }
  let latest = stat.mtimeMs;
  if (stat.isDirectory()) {
    for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  }
  return latest;
}

/** Why a build is needed (the first package out of date), or null when every build is current. */
function staleness() {
  const shared = newest(join(ROOT, 'tsconfig.base.json'));
  for (const name of PACKAGES) {
    const dir = join(ROOT, 'packages', name);
    let built;
    try {
      built = statSync(join(dir, 'tsconfig.tsbuildinfo')).mtimeMs;
    } catch {
      return 'not built yet';
    }
    const inputs = Math.max(shared, newest(join(dir, 'src')), newest(join(dir, 'tsconfig.json')), newest(join(dir, 'package.json')));
    if (inputs > built) return `packages/${name} changed since its last build`;
  }
  return null;
}

const reason = staleness();
if (reason !== null) {
  process.stderr.write(`cos-admin: building (${reason})…\n`);
  const tsc = createRequire(join(ROOT, 'package.json')).resolve('typescript/bin/tsc');
  const build = spawnSync(process.execPath, [tsc, '-b', '--verbose', 'packages/cli'], { cwd: ROOT, stdio: ['ignore', 2, 2] });
  if (build.status !== 0) {
    process.stderr.write(`cos-admin: the build failed (tsc -b exited ${build.status ?? build.signal}); nothing was run\n`);
    process.exit(1);
  }
  process.stderr.write('cos-admin: built.\n');
}

await import(pathToFileURL(join(ROOT, 'packages/cli/dist/main.js')).href);
