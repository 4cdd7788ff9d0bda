// Resolves the workspace's own dependencies from the package that declares them, so the bench
// needs nothing at the repository root beyond `pnpm install` (the packages are not hoisted).
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Imports `specifier` as the package at packages/<pkg> would see it (its "default" export condition). */
export async function importFrom(pkg, specifier) {
  const require = createRequire(path.join(ROOT, 'packages', pkg, 'package.json'));
  return import(pathToFileURL(require.resolve(specifier)).href);
}

/** The built output of one of our packages (`pnpm bench` builds first, as `pnpm build` does). */
export async function importBuilt(pkg) {
  return import(pathToFileURL(path.join(ROOT, 'packages', pkg, 'dist', 'index.js')).href);
}

export const CLI_MAIN = path.join(ROOT, 'packages', 'cli', 'dist', 'main.js');
