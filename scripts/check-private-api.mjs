#!/usr/bin/env node
// pnpm check: no source file reaches into a dependency's private API. A knex or Node
// upgrade may change those silently; a build would still pass and only behaviour (or speed) would
// show it. Two things are refused in packages/*/src:
//   1. a deep import or require of a package subpath its package.json does not export
//      (`knex/lib/dialects/postgres/index.js`); a package without an `exports` map documents
//      nothing below its main entry, so any subpath of it counts as undocumented;
//   2. a `_`-prefixed member: read (`client._query`, `socket._httpMessage`), declared in a shape
//      (`_query(…): …` in an interface) or overridden (`override async _query`). The project's own
//      code uses `#private` fields and plain names, so any such member belongs to somebody else.
// Prints each finding as file:line and exits 1 when there is any. `node scripts/check-private-api.mjs DIR…`
// checks those folders instead of packages/*/src.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BUILTINS = new Set(builtinModules);

function* sourceFiles(dir) {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|mts|cts|js|mjs)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) yield path;
  }
}

/** `@scope/name/sub` -> ['@scope/name', './sub']; `name` -> ['name', '.']. */
function splitSpecifier(specifier) {
  const parts = specifier.split('/');
  const nameParts = specifier.startsWith('@') ? 2 : 1;
  const name = parts.slice(0, nameParts).join('/');
  const rest = parts.slice(nameParts).join('/');
  return [name, rest === '' ? '.' : `./${rest}`];
}

/** The package.json of `name` as the importing file resolves it, or null when it cannot be found. */
function manifestOf(name, fromFile) {
  const require = createRequire(fromFile);
  try {
    return JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8'));
  } catch {
    // Packages whose exports map hides package.json: walk node_modules upwards.
    for (let dir = dirname(fromFile); ; dir = dirname(dir)) {
      const candidate = join(dir, 'node_modules', name, 'package.json');
      if (existsSync(candidate)) return JSON.parse(readFileSync(candidate, 'utf8'));
      if (dirname(dir) === dir) return null;
    }
  }
}

function exportsSubpath(exportsField, subpath) {
  if (exportsField === undefined) return subpath === '.';
  if (typeof exportsField === 'string' || Array.isArray(exportsField)) return subpath === '.';
  const keys = Object.keys(exportsField);
  if (!keys.some((k) => k.startsWith('.'))) return subpath === '.'; // conditions only: the main entry
  return keys.some((key) => {
    if (key === subpath) return true;
    const star = key.indexOf('*');
    return star !== -1 && subpath.startsWith(key.slice(0, star)) && subpath.endsWith(key.slice(star + 1));
  });
}

const findings = [];
function report(file, node, source, what) {
  const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
  findings.push(`${relative(ROOT, file)}:${line + 1}: ${what}`);
}

function checkSpecifier(file, node, source, specifier) {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:') || BUILTINS.has(specifier)) return;
  const [name, subpath] = splitSpecifier(specifier);
  if (subpath === '.') return;
  const manifest = manifestOf(name, file);
  if (manifest === null) {
    report(file, node, source, `import of '${specifier}': package ${name} not found`);
    return;
  }
  if (!exportsSubpath(manifest.exports, subpath)) report(file, node, source, `import of '${specifier}': ${name} does not export ${subpath}`);
}

const isPrivateName = (name) => /^_/.test(name);

function visit(file, source, node) {
  if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
    checkSpecifier(file, node, source, node.moduleSpecifier.text);
  } else if (ts.isCallExpression(node) && node.arguments.length >= 1 && ts.isStringLiteralLike(node.arguments[0])) {
    const callee = node.expression;
    if ((ts.isIdentifier(callee) && callee.text === 'require') || callee.kind === ts.SyntaxKind.ImportKeyword) {
      checkSpecifier(file, node, source, node.arguments[0].text);
    }
  } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
    checkSpecifier(file, node, source, node.argument.literal.text);
  }
  if (ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.name) && isPrivateName(node.name.text)) {
    report(file, node, source, `reads the private member ${node.name.text}`);
  } else if (ts.isElementAccessExpression(node) && ts.isStringLiteralLike(node.argumentExpression) && isPrivateName(node.argumentExpression.text)) {
    report(file, node, source, `reads the private member ${node.argumentExpression.text}`);
  } else if (
    (ts.isPropertySignature(node) || ts.isMethodSignature(node) || ts.isMethodDeclaration(node) || ts.isPropertyDeclaration(node)) &&
    node.name !== undefined &&
    (ts.isIdentifier(node.name) || ts.isStringLiteral(node.name)) &&
    isPrivateName(node.name.text)
  ) {
    report(file, node, source, `declares or overrides the private member ${node.name.text}`);
  }
  ts.forEachChild(node, (child) => visit(file, source, child));
}

// Arguments: folders to check instead (the script's own test points it at fixtures).
const packagesDir = join(ROOT, 'packages');
const roots = process.argv.length > 2 ? process.argv.slice(2).map((d) => resolve(d)) : readdirSync(packagesDir).map((pkg) => join(packagesDir, pkg, 'src'));
for (const root of roots) {
  for (const file of sourceFiles(root)) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    visit(file, source, source);
  }
}

if (findings.length > 0) {
  process.stderr.write(`Private API of a dependency used:\n${findings.map((f) => `  ${f}`).join('\n')}\n`);
  process.exit(1);
}
process.stdout.write('no private API of a dependency is used\n');
