// Whether `pnpm cos-admin` must build first (cos-admin.mjs): a package's sources, tsconfig.json or
// package.json (or the shared tsconfig.base.json) newer than that package's tsconfig.tsbuildinfo,
// which `tsc -b` writes when it compiles the package and the launcher touches after every
// successful `tsc -b` (markBuilt). Only modification times are read: a few hundred stat calls, no
// TypeScript start-up.
import { readdirSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';

/** The packages `tsc -b packages/cli` builds (packages/cli/tsconfig.json's references, and cli). */
export const PACKAGES = ['core', 'store-sql', 'limiter-redis', 'adapter-koa', 'webhook-sender', 'cli'];

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
export function staleness(root, packages = PACKAGES) {
  const shared = newest(join(root, 'tsconfig.base.json'));
  for (const name of packages) {
    const dir = join(root, 'packages', name);
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

/**
 * After a successful `tsc -b`: records every package's build as current. tsc leaves the
 * tsconfig.tsbuildinfo of a package it finds up to date untouched, and a change to package.json
 * alone (which tsc does not read as an input) would otherwise make every later run build again.
 */
export function markBuilt(root, packages = PACKAGES) {
  const now = new Date();
  for (const name of packages) {
    try {
      utimesSync(join(root, 'packages', name, 'tsconfig.tsbuildinfo'), now, now);
    } catch {
      // not built: the next staleness check says so
    }
  }
}
