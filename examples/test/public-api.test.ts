/**
 * Each package's public surface: semver-ready metadata, an `exports` map whose entry
 * points are all an embedder needs, and declarations (tsc's own .d.ts output) through which
 * nothing internal leaks: no `any`, no exported signature naming a type the package does not
 * export, and no import of a package a consumer would not get installed.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import ts from 'typescript';

const exec = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PACKAGES = ['core', 'store-sql', 'limiter-redis', 'adapter-koa', 'cli'] as const;

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  description?: string;
  keywords?: string[];
  license?: string;
  type?: string;
  sideEffects?: boolean | string[];
  main?: string;
  types?: string;
  exports: Record<string, string | Record<string, string>>;
  files?: string[];
  engines?: { node?: string };
  imports?: Record<string, Record<string, string>>;
  publishConfig?: { access?: string; exports?: Record<string, string | Record<string, string>>; imports?: Record<string, Record<string, string>> };
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

const manifest = (pkg: string): Manifest =>
  JSON.parse(readFileSync(join(ROOT, 'packages', pkg, 'package.json'), 'utf8')) as Manifest;

/** Subpath -> conditions of the code entry points (not ./package.json). */
function entryPoints(m: Manifest): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const [subpath, target] of Object.entries(m.exports)) {
    if (subpath === './package.json') continue;
    if (typeof target === 'string') throw new Error(`${m.name} ${subpath}: expected conditions, got ${target}`);
    out[subpath] = target;
  }
  return out;
}

describe('public surface of the packages', function () {
  this.timeout(60_000);

  before(async () => {
    await exec(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-b'], { cwd: ROOT });
  });

  for (const pkg of PACKAGES) {
    it(`@cos/${pkg}: semver-ready metadata, exports map "source" then "types" then "default", published without "source"`, () => {
      const m = manifest(pkg);
      expect(m.name).to.equal(`@cos/${pkg}`);
      expect(m.private, 'published packages are not private').to.equal(undefined);
      expect(m.version).to.match(/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/);
      expect(m.description).to.be.a('string').and.have.length.greaterThan(20);
      expect(m.keywords).to.be.an('array').that.is.not.empty;
      expect(m.license).to.equal('MIT');
      expect(m.type).to.equal('module');
      expect(m.sideEffects, 'sideEffects declared').not.to.equal(undefined);
      // Node 22 and 20.19+ (Node 24 waits for better-sqlite3 13, see README); the same range as the workspace's.
      expect(m.engines?.node).to.equal('^20.19.0 || ^22.12.0');
      expect(m.engines?.node).to.equal((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node);
      // the cli also ships its bin shim (bin/cos-admin.js imports dist/main.js)
      // No source maps are shipped (they would point at src/, which is not): none is built, and a
      // stale one left in dist/ by an older build is excluded too.
      expect(m.files).to.deep.equal(pkg === 'cli' ? ['bin', 'dist', '!dist/**/*.map', 'README.md'] : ['dist', '!dist/**/*.map', 'README.md']);
      expect(existsSync(join(ROOT, 'packages', pkg, 'README.md')), 'README.md').to.equal(true);
      expect(m.main).to.equal('./dist/index.js');
      expect(m.types).to.equal('./dist/index.d.ts');
      expect(m.exports['./package.json']).to.equal('./package.json');
      const entries = entryPoints(m);
      expect(Object.keys(entries)).to.include('.');
      for (const [subpath, conditions] of Object.entries(entries)) {
        const sub = subpath.slice(2);
        const base =
          subpath === '.'
            ? 'index'
            : existsSync(join(ROOT, 'packages', pkg, 'src', sub, 'index.ts'))
              ? `${sub}/index`
              : sub;
        expect(Object.entries(conditions), `${pkg} ${subpath}`).to.deep.equal([
          ['source', `./src/${base}.ts`],
          ['types', `./dist/${base}.d.ts`],
          ['default', `./dist/${base}.js`],
        ]);
        for (const file of Object.values(conditions)) expect(existsSync(join(ROOT, 'packages', pkg, file)), file).to.equal(true);
      }
      const published = Object.fromEntries(
        Object.entries(m.exports).map(([subpath, target]) => {
          if (typeof target === 'string') return [subpath, target];
          const { source: _workspaceOnly, ...rest } = target;
          return [subpath, rest];
        }),
      );
      expect(m.publishConfig?.access).to.equal('public');
      expect(m.publishConfig?.exports).to.deep.equal(published);
      for (const [name, range] of Object.entries(m.dependencies ?? {})) {
        if (name.startsWith('@cos/')) expect(range, `${name} is a workspace dependency`).to.equal('workspace:*');
      }
    });
  }

  it('the public declarations contain no `any` and name no type their package does not export', () => {
    const roots = new Map<string, string>();
    for (const pkg of PACKAGES) {
      for (const [subpath, conditions] of Object.entries(entryPoints(manifest(pkg)))) {
        roots.set(`@cos/${pkg}${subpath.slice(1)}`, join(ROOT, 'packages', pkg, conditions['types']!));
      }
    }
    const program = ts.createProgram([...roots.values()], {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ['node', 'mocha'],
      typeRoots: [join(ROOT, 'node_modules', '@types')],
      noEmit: true,
    });
    const checker = program.getTypeChecker();
    const ours = (file: string) => file.startsWith(join(ROOT, 'packages')) && !file.includes('node_modules');
    const resolveAlias = (s: ts.Symbol) => (s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s);

    const exported: Array<[string, ts.Symbol]> = [];
    const publicDeclarations = new Set<ts.Declaration>();
    for (const [entry, file] of roots) {
      const source = program.getSourceFile(file);
      expect(source, file).not.to.equal(undefined);
      const moduleSymbol = checker.getSymbolAtLocation(source!);
      expect(moduleSymbol, file).not.to.equal(undefined);
      for (const e of checker.getExportsOfModule(moduleSymbol!)) {
        const symbol = resolveAlias(e);
        for (const d of symbol.declarations ?? []) publicDeclarations.add(d);
        exported.push([`${entry}:${e.name}`, symbol]);
      }
    }
    expect(exported.length).to.be.greaterThan(100);

    const problems = new Set<string>();
    const visit = (node: ts.Node, owner: string): void => {
      if (node.kind === ts.SyntaxKind.AnyKeyword) problems.add(`${owner}: \`any\` in ${relative(ROOT, node.getSourceFile().fileName)}`);
      let target: ts.Node | undefined;
      if (ts.isTypeReferenceNode(node)) target = node.typeName;
      else if (ts.isExpressionWithTypeArguments(node)) target = node.expression;
      else if (ts.isTypeQueryNode(node)) target = node.exprName;
      else if (ts.isImportTypeNode(node)) target = node.qualifier;
      const symbol = target === undefined ? undefined : checker.getSymbolAtLocation(target);
      if (symbol !== undefined && !(symbol.flags & ts.SymbolFlags.TypeParameter)) {
        const resolved = resolveAlias(symbol);
        for (const d of resolved.declarations ?? []) {
          const file = d.getSourceFile().fileName;
          if (ours(file) && !publicDeclarations.has(d)) {
            problems.add(`${owner} names ${resolved.name}, which no entry point exports (${relative(ROOT, file)})`);
          }
        }
      }
      ts.forEachChild(node, (child) => visit(child, owner));
    };
    for (const [owner, symbol] of exported) {
      for (const d of symbol.declarations ?? []) if (ours(d.getSourceFile().fileName)) visit(d, owner);
    }
    expect([...problems]).to.deep.equal([]);
  });

  it('every package a shipped .d.ts imports is a dependency, with its types installed alongside', () => {
    const problems: string[] = [];
    const options: ts.CompilerOptions = { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext };
    for (const pkg of PACKAGES) {
      const dir = join(ROOT, 'packages', pkg);
      const m = manifest(pkg);
      const declared = { ...m.dependencies, ...m.peerDependencies };
      const dts = (readdirSync(join(dir, 'dist'), { recursive: true }) as string[]).filter((f) => f.endsWith('.d.ts'));
      const imported = new Set<string>();
      for (const file of dts) {
        const text = readFileSync(join(dir, 'dist', file), 'utf8');
        for (const match of text.matchAll(/(?:\bfrom\s+|\bimport\(\s*)['"]([^'"./][^'"]*)['"]/g)) {
          let specifier = match[1]!;
          if (specifier.startsWith('node:')) continue;
          if (specifier.startsWith('#')) {
            // A subpath import (package.json "imports", as published): its types come from the package its
            // "types" condition names, which must then be a dependency like any other import.
            const target = (m.publishConfig?.imports ?? m.imports)?.[specifier]?.types;
            if (target === undefined) {
              problems.push(`@cos/${pkg} .d.ts imports ${specifier}, which its published "imports" map gives no types for`);
              continue;
            }
            specifier = target;
          }
          const parts = specifier.split('/');
          imported.add(specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!);
        }
      }
      imported.delete(m.name); // a package may import itself by name (e.g. @cos/core/testing)
      for (const name of imported) {
        if (!(name in declared)) {
          problems.push(`@cos/${pkg} .d.ts imports ${name}, which is not a dependency`);
          continue;
        }
        // Where a consumer's TypeScript finds the types: in the package itself, or in @types/<name>.
        const found = ts.resolveModuleName(name, join(dir, 'dist', 'index.d.ts'), options, ts.sys).resolvedModule;
        const typesPackage = `@types/${name.replace(/^@([^/]+)\//, '$1__')}`;
        if (found === undefined || !/\.d\.[cm]?ts$/.test(found.resolvedFileName)) {
          problems.push(`@cos/${pkg} .d.ts imports ${name}, for which TypeScript finds no declarations`);
        } else if (found.resolvedFileName.includes(`/node_modules/${typesPackage}/`) && !(typesPackage in declared)) {
          problems.push(`@cos/${pkg} .d.ts imports ${name}, whose types come from ${typesPackage}, which is not a dependency`);
        }
      }
    }
    expect(problems).to.deep.equal([]);
  });
});
