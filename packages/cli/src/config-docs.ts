/**
 * The configuration table in the forms the docs and `--help` show, all rendered from CONFIG_TABLE
 * (the one definition, config.ts). `pnpm docs:config` writes them into the files; a test fails when
 * a file no longer matches.
 */
import { CONFIG_TABLE } from './config.js';

const code = (s: string): string => `\`${s}\``;

/** The Markdown table: variable, default, meaning. */
export function configMarkdownTable(): string {
  return [
    '| variable | default | meaning |',
    '|---|---|---|',
    ...CONFIG_TABLE.map((r) => `| ${code(r.variable)} | ${r.default === 'unset' ? 'unset' : code(r.default)} | ${r.meaning.replace(/\|/g, '\\|')} |`),
  ].join('\n');
}

/** `.env.example`: every variable with its default (commented out when it has none). */
export function envExample(): string {
  const lines = [
    '# cos-admin configuration: every variable with its default (generated from packages/cli/src/config.ts',
    '# by `pnpm docs:config`). Copy to .env and change what you need; variables already set in the',
    '# environment win over .env. Empty values count as unset.',
  ];
  for (const r of CONFIG_TABLE) {
    lines.push('', `# ${r.meaning.replace(/`/g, '')}`);
    lines.push(r.default === 'unset' ? `# ${r.variable}=` : `${r.variable}=${r.default}`);
  }
  return `${lines.join('\n')}\n`;
}

/** The table for `--help` (plain text). */
export function configHelpTable(): string[] {
  const width = Math.max(...CONFIG_TABLE.map((r) => r.variable.length));
  const dflt = Math.max(...CONFIG_TABLE.map((r) => r.default.length));
  return CONFIG_TABLE.map((r) => `  ${r.variable.padEnd(width)}  ${r.default.padEnd(dflt)}  ${r.meaning.replace(/`/g, '')}`);
}
