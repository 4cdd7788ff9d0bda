#!/usr/bin/env node
// The built CLI loads inversify from one file, dist/vendor/inversify.js: the inversify package and
// everything it imports (the @inversifyjs packages, reflect-metadata/lite) bundled by esbuild into
// one ES module. Node loads the package as some 250 ES module files, one by one, a large share of
// an operator command's CPU; one file costs a few milliseconds
// (docs/decisions/0028-inversify-bundled-into-the-cli.md). package.json's "imports" maps
// `#inversify` to that file; under the "source" condition (tests, tsx) and for types it is the
// inversify package itself, which stays a dependency (the declarations embedders compile against
// name its types).
//
// Beside the bundle: inversify.LEGAL.txt, the licence files of every package in it (not named
// *LICENSE*: pnpm pack leaves the repository's LICENSE out of a package that has such a file), and
// inversify.json, the name@version of inversify and of everything it depends on as installed when
// it was bundled. bundleStaleness compares that list with what is installed now, so a launcher or
// a build finds a bundle that is missing, older than this script, or made from other versions.
//
// `node packages/cli/scripts/bundle-inversify.mjs` (`pnpm build` runs it after `tsc -b`) bundles
// when the bundle is stale and says so on stdout; otherwise it does nothing.
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(import.meta.url);
/** packages/cli, whose dependency `inversify` is bundled. */
export const CLI_DIR = dirname(dirname(SCRIPT));
/** The bundle, relative to the cli's directory (package.json "imports" names it too). */
export const BUNDLE = 'dist/vendor/inversify.js';
const LICENCES = 'dist/vendor/inversify.LEGAL.txt';
const STAMP = 'dist/vendor/inversify.json';
const LICENCE_FILE = /^(licen[cs]e|copying|notice|copyrightnotice)(\.|$)/i;

/** The directory of package `name` as Node resolves it from `from` (node_modules up the tree), or null. */
function packageDir(name, from) {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return realpathSync(candidate);
    if (dirname(dir) === dir) return null;
  }
}

/**
 * `name@version` of inversify as installed for the cli, and of every package it depends on
 * (dependencies, peer and optional dependencies that are installed), sorted: what the bundle is
 * made from. A few package.json reads.
 */
export function installedPackages(cliDir = CLI_DIR) {
  const found = new Set();
  const seen = new Set();
  const visit = (name, from) => {
    const dir = packageDir(name, from);
    if (dir === null || seen.has(dir)) return;
    seen.add(dir);
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    found.add(`${manifest.name}@${manifest.version}`);
    for (const dep of Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies, ...manifest.optionalDependencies })) visit(dep, dir);
  };
  if (packageDir('inversify', cliDir) === null) throw new Error(`inversify is not installed for ${cliDir} (install first)`);
  visit('inversify', cliDir);
  return [...found].sort();
}

/**
 * Why the bundle must be made (again), or null when it is current: missing, older than this
 * script, or made from other versions than those installed now.
 */
export function bundleStaleness(cliDir = CLI_DIR) {
  let stamp;
  let made;
  try {
    made = statSync(join(cliDir, BUNDLE)).mtimeMs;
    stamp = JSON.parse(readFileSync(join(cliDir, STAMP), 'utf8'));
  } catch {
    return `${BUNDLE} is missing`;
  }
  if (statSync(SCRIPT).mtimeMs > made) return `${relative(cliDir, SCRIPT)} changed since ${BUNDLE} was made`;
  const installed = installedPackages(cliDir);
  if (JSON.stringify(installed) !== JSON.stringify(stamp.packages)) {
    const was = new Set(stamp.packages);
    const now = installed.filter((p) => !was.has(p));
    return `${BUNDLE} was made from other versions (installed now: ${now.join(', ') || 'fewer packages'})`;
  }
  return null;
}

/** The package directory a bundled file belongs to (the last node_modules/<name> in its path). */
function packageOf(file) {
  const parts = file.split(sep);
  const at = parts.lastIndexOf('node_modules');
  if (at < 0) return null;
  const length = parts[at + 1]?.startsWith('@') ? 2 : 1;
  return parts.slice(0, at + 1 + length).join(sep);
}

/** Writes `text` to `path` through a temporary file, so a reader never sees half of it. */
function writeWhole(path, text) {
  const partial = `${path}.${process.pid}.partial`;
  writeFileSync(partial, text);
  renameSync(partial, path);
}

/** Bundles inversify into dist/vendor/inversify.js, with its licences and the stamp beside it. */
export async function bundleInversify(cliDir = CLI_DIR) {
  const esbuild = await import('esbuild');
  const packages = installedPackages(cliDir);
  const inversify = packages.find((p) => p.startsWith('inversify@'));
  const result = await esbuild.build({
    stdin: { contents: "export * from 'inversify';", resolveDir: cliDir, loader: 'js', sourcefile: 'inversify-bundle.js' },
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // The licence texts go into their own file, in full, rather than as comments in the bundle.
    legalComments: 'none',
    banner: {
      js: `// ${inversify} and the packages it imports, bundled into one ES module by packages/cli/scripts/bundle-inversify.mjs.\n// Their licences: inversify.LEGAL.txt beside this file.`,
    },
    metafile: true,
    write: false,
    logLevel: 'silent',
    absWorkingDir: cliDir,
  });
  for (const warning of result.warnings) process.stderr.write(`bundle-inversify: ${warning.text}\n`);

  // One licence section per package in the bundle (not per package installed: type-only ones add nothing).
  const dirs = new Set();
  for (const input of Object.keys(result.metafile.inputs)) {
    const dir = packageOf(join(cliDir, input));
    if (dir !== null) dirs.add(realpathSync(dir));
  }
  const sections = [...dirs]
    .map((dir) => {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
      const files = readdirSync(dir).filter((f) => LICENCE_FILE.test(f)).sort();
      if (files.length === 0) throw new Error(`${manifest.name}@${manifest.version} has no licence file to ship with the bundle (${dir})`);
      const texts = files.map((f) => readFileSync(join(dir, f), 'utf8').trim());
      return { id: `${manifest.name}@${manifest.version}`, text: `${manifest.name}@${manifest.version} (${manifest.license})\n\n${texts.join('\n\n')}\n` };
    })
    .sort((a, b) => a.id.localeCompare(b.id));
  const header = `dist/vendor/inversify.js bundles these packages; their licences follow.\n\n${sections.map((s) => `- ${s.id}`).join('\n')}\n`;
  const rule = `\n${'-'.repeat(72)}\n\n`;

  mkdirSync(join(cliDir, 'dist/vendor'), { recursive: true });
  writeWhole(join(cliDir, BUNDLE), result.outputFiles[0].contents);
  writeWhole(join(cliDir, LICENCES), [header, ...sections.map((s) => s.text)].join(rule));
  // Last: a stamp beside a bundle means the bundle is complete.
  writeWhole(join(cliDir, STAMP), `${JSON.stringify({ packages }, null, 2)}\n`);
  // What an earlier version of this script left there would be packed too.
  const made = new Set([BUNDLE, LICENCES, STAMP].map((f) => f.slice('dist/vendor/'.length)));
  for (const entry of readdirSync(join(cliDir, 'dist/vendor'))) {
    if (!made.has(entry) && !entry.endsWith('.partial')) rmSync(join(cliDir, 'dist/vendor', entry), { recursive: true, force: true });
  }
  return { bytes: result.outputFiles[0].contents.length, packages: sections.map((s) => s.id) };
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === SCRIPT) {
  const reason = bundleStaleness();
  if (reason !== null) {
    const { bytes, packages } = await bundleInversify();
    process.stdout.write(`bundle-inversify: made ${BUNDLE} (${Math.round(bytes / 1024)} kB from ${packages.length} packages): ${reason}\n`);
  }
}
