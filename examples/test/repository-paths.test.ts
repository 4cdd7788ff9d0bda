/**
 * The repository names only what it holds, and its code speaks of now
 * (docs/decisions/0017-code-speaks-of-now.md):
 *  - every relative markdown link of README.md, docs/ and the package READMEs, and every
 *    repository path such a document names in backticks, exists in the repository;
 *  - every file path a configuration names (.dependency-cruiser.cjs, knip.json, tsconfig*.json,
 *    .mocharc*.cjs) exists in the repository;
 *  - no source file under packages/[name]/src cites an issue number: decisions and their history
 *    live in docs/decisions/, comments say what the code does and why;
 *  - no test, test support, example, bench or script file cites one either: a test title names the
 *    contract rule (C-n) it checks, or says what it checks;
 *  - no source file under packages/[name]/src is longer than 400 lines (the port contract suites
 *    excepted);
 *  - every port of core has its row in the ports table of docs/architecture.md.
 * Reads files only: no process, no network.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(path, keep));
    else if (keep(entry.name)) out.push(path);
  }
  return out;
}

/** An issue cited by number: "issue 17", "issue-18", "issues 15 and 18", "Issue #14", "#14". */
const ISSUE = /\b[Ii]ssues?[- ]#?\d+|(?<![\w&])#\d+\b/;

const PACKAGES = readdirSync(join(ROOT, 'packages')).filter((p) => statSync(join(ROOT, 'packages', p)).isDirectory());

/** Each line of `files` that cites an issue number, as "file:line: text". */
function issueCitations(files: readonly string[]): string[] {
  const cited: string[] = [];
  for (const file of files) {
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (ISSUE.test(line)) cited.push(`${relative(ROOT, file)}:${i + 1}: ${line.trim()}`);
      });
  }
  return cited;
}

/** `path` (absolute) exists and lies inside the repository. */
function inRepository(path: string): boolean {
  const rel = relative(ROOT, path);
  return !rel.startsWith('..') && !rel.startsWith(sep) && existsSync(path);
}

/** The part of a glob or path pattern before its first wildcard, without a trailing slash. */
function staticPrefix(pattern: string): string {
  const cut = pattern.search(/[*?{[(|$]/);
  const head = cut === -1 ? pattern : pattern.slice(0, cut);
  return head.replace(/\/[^/]*$/, cut === -1 ? '$&' : '').replace(/\/$/, '');
}

/** Each missing path as "file: path". */
function missing(file: string, paths: readonly string[], base: string): string[] {
  return paths.filter((p) => p !== '' && !inRepository(resolve(base, p))).map((p) => `${relative(ROOT, file)}: ${p}`);
}

describe('repository paths and source comments', () => {
  const markdown = [
    join(ROOT, 'README.md'),
    ...filesUnder(join(ROOT, 'docs'), (n) => n.endsWith('.md')),
    ...PACKAGES.map((p) => join(ROOT, 'packages', p, 'README.md')).filter(existsSync),
  ];

  it('every relative link of README.md, docs/ and the package READMEs names an existing file', () => {
    const broken: string[] = [];
    for (const file of markdown) {
      const text = readFileSync(file, 'utf8');
      const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g)]
        .map((m) => m[1]!)
        .filter((t) => !/^[a-z]+:/i.test(t) && !t.startsWith('#'))
        .map((t) => decodeURIComponent(t.replace(/#.*$/, '')));
      broken.push(...missing(file, targets, dirname(file)));
    }
    expect(markdown.length).to.be.greaterThan(10);
    expect(broken).to.deep.equal([]);
  });

  it('every repository path a document names in backticks exists', () => {
    const broken: string[] = [];
    for (const file of markdown) {
      const text = readFileSync(file, 'utf8');
      const paths = [...text.matchAll(/`((?:packages|docs|examples|scripts|bench)\/[\w./-]*\.(?:ts|mjs|cjs|js|md|json|yaml|sql))(?::\d+)?`/g)]
        .map((m) => m[1]!)
        .filter((p) => !p.includes('/dist/') && !/[*{]/.test(p));
      broken.push(...missing(file, paths, ROOT));
    }
    expect(broken).to.deep.equal([]);
  });

  it('every path .dependency-cruiser.cjs names (rules and comments) exists', () => {
    const file = join(ROOT, '.dependency-cruiser.cjs');
    const text = readFileSync(file, 'utf8');
    const fromComments = [...text.matchAll(/(?:\.\.?\/)*(?:docs|packages|scripts|examples|shared)\/[\w./-]*\.(?:md|ts|mjs|cjs|json)/g)].map((m) => m[0]);
    const fromRules = [...text.matchAll(/'\^(packages\/[^']*)'/g)]
      .map((m) => staticPrefix(m[1]!.replace(/\\\./g, '.')))
      .filter((p) => p.includes('/'));
    const tsConfig = /fileName: '([^']+)'/.exec(text)?.[1] ?? 'no tsConfig.fileName';
    expect(fromComments.length + fromRules.length).to.be.greaterThan(5);
    expect([...missing(file, fromComments, ROOT), ...missing(file, fromRules, ROOT), ...missing(file, [tsConfig], ROOT)]).to.deep.equal([]);
  });

  it('every entry and project path of knip.json exists in its workspace', () => {
    const file = join(ROOT, 'knip.json');
    const knip = JSON.parse(readFileSync(file, 'utf8')) as { workspaces: Record<string, { entry?: string[]; project?: string[] }> };
    const broken: string[] = [];
    for (const [workspace, settings] of Object.entries(knip.workspaces)) {
      const dirs = workspace.endsWith('/*') ? PACKAGES.map((p) => join(ROOT, 'packages', p)) : [join(ROOT, workspace)];
      const patterns = [...(settings.entry ?? []), ...(settings.project ?? [])].map((p) => staticPrefix(p.replace(/!$/, '')));
      for (const pattern of patterns) {
        // A `packages/*` pattern applies to each package that has the folder; one workspace must have it.
        if (pattern === '' || dirs.some((d) => inRepository(join(d, pattern)))) continue;
        broken.push(`knip.json ${workspace}: ${pattern}`);
      }
    }
    expect(broken).to.deep.equal([]);
  });

  it('every extends, reference and include of the tsconfig files exists', () => {
    const files = [
      ...readdirSync(ROOT).filter((n) => /^tsconfig.*\.json$/.test(n)).map((n) => join(ROOT, n)),
      ...PACKAGES.flatMap((p) => readdirSync(join(ROOT, 'packages', p)).filter((n) => /^tsconfig.*\.json$/.test(n)).map((n) => join(ROOT, 'packages', p, n))),
    ];
    const broken: string[] = [];
    for (const file of files) {
      const config = JSON.parse(readFileSync(file, 'utf8')) as { extends?: string; references?: { path: string }[]; include?: string[]; files?: string[] };
      const paths = [
        ...(config.extends === undefined ? [] : [config.extends]),
        ...(config.references ?? []).map((r) => r.path),
        ...(config.files ?? []),
        ...(config.include ?? []).map(staticPrefix),
      ];
      broken.push(...missing(file, paths, dirname(file)));
    }
    expect(files.length).to.be.greaterThan(3);
    expect(broken).to.deep.equal([]);
  });

  it('every spec path of the .mocharc files exists', () => {
    const files = readdirSync(ROOT).filter((n) => /^\.mocharc.*\.cjs$/.test(n)).map((n) => join(ROOT, n));
    const broken: string[] = [];
    for (const file of files) {
      const specs = [...readFileSync(file, 'utf8').matchAll(/'((?:packages|examples)\/[^']+)'/g)].map((m) => staticPrefix(m[1]!));
      broken.push(...missing(file, specs, ROOT));
    }
    expect(files.length).to.be.greaterThan(0);
    expect(broken).to.deep.equal([]);
  });

  it('no source file under packages/*/src cites an issue number (decisions live in docs/decisions/)', () => {
    const sources = PACKAGES.filter((p) => existsSync(join(ROOT, 'packages', p, 'src'))).flatMap((p) =>
      filesUnder(join(ROOT, 'packages', p, 'src'), (n) => /\.(ts|mts|cts|js|mjs)$/.test(n)),
    );
    expect(sources.length).to.be.greaterThan(100);
    expect(issueCitations(sources)).to.deep.equal([]);
  });

  it('no source file under packages/*/src is longer than 400 lines, the port contract suites excepted (a longer file is split along its seams)', () => {
    const sources = PACKAGES.flatMap((p) => (existsSync(join(ROOT, 'packages', p, 'src')) ? filesUnder(join(ROOT, 'packages', p, 'src'), (n) => n.endsWith('.ts')) : []));
    const long = sources
      .filter((file) => !relative(ROOT, file).split(sep).join('/').includes('/src/testing/contracts/'))
      .map((file) => ({ file: relative(ROOT, file), lines: readFileSync(file, 'utf8').split('\n').length - 1 }))
      .filter((f) => f.lines > 400)
      .map((f) => `${f.file}: ${f.lines} lines`);
    expect(sources.length, 'source files found').to.be.greaterThan(100);
    expect(long).to.deep.equal([]);
  });

  it('every port of core (the interface each packages/core/src/ports file is named after) has its row in the ports table of docs/architecture.md', () => {
    const architecture = readFileSync(join(ROOT, 'docs', 'architecture.md'), 'utf8');
    const table = architecture.slice(architecture.indexOf('\n## Ports\n'));
    const rows = table.split('\n').filter((line) => line.startsWith('| `'));
    const ports = readdirSync(join(ROOT, 'packages', 'core', 'src', 'ports'))
      .filter((file) => file.endsWith('.ts') && file !== 'index.ts')
      .map((file) => ({ file, name: file.replace(/\.ts$/, '').replace(/(^|-)(\w)/g, (_m, _dash: string, c: string) => c.toUpperCase()) }))
      .filter(({ file, name }) => new RegExp(`^export (interface|type) ${name}\\b|^export type \\{ ${name} \\}`, 'm').test(readFileSync(join(ROOT, 'packages', 'core', 'src', 'ports', file), 'utf8')));
    expect(ports.length, 'ports found').to.be.greaterThan(15);
    const missing = ports.filter(({ name }) => !rows.some((row) => row.split('|')[1]!.includes(`\`${name}\``))).map(({ file, name }) => `${name} (ports/${file})`);
    expect(missing).to.deep.equal([]);
  });

  it('no test, test support, example, bench or script file cites an issue number (test titles say what they check)', () => {
    const code = (n: string): boolean => /\.(ts|mts|cts|js|mjs|cjs)$/.test(n);
    const files = [
      ...PACKAGES.filter((p) => existsSync(join(ROOT, 'packages', p, 'test'))).flatMap((p) => filesUnder(join(ROOT, 'packages', p, 'test'), code)),
      ...filesUnder(join(ROOT, 'packages', 'test-support', 'lib'), code),
      ...filesUnder(join(ROOT, 'examples'), code),
      ...filesUnder(join(ROOT, 'bench'), code),
      ...filesUnder(join(ROOT, 'scripts'), code),
    ].filter((file) => file !== fileURLToPath(import.meta.url)); // this file shows the forms the rule refuses
    expect(files.length).to.be.greaterThan(100);
    expect(issueCitations(files)).to.deep.equal([]);
  });

  it('the issue-number rule recognises the forms it refuses, and leaves rule ids and private fields alone', () => {
    for (const line of ['// (issue 17)', '// the issue-18 bound', ' * issues 15 and 18', '// Issue #14', '// see #14']) expect(ISSUE.test(line), line).to.equal(true);
    for (const line of ['// C-36 keeps it', 'this.#measureClockOffset()', "'&#39;'", '// fixed at issue time']) expect(ISSUE.test(line), line).to.equal(false);
  });
});
