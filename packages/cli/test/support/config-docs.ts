/**
 * The files that show the configuration table, and their generated parts: README.md,
 * docs/operations.md and packages/cli/README.md between the markers below, and .env.example
 * whole. `pnpm docs:config` runs this file to write them; config-docs.test.ts checks them.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configMarkdownTable, envExample } from '../../src/config-docs.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

export const BEGIN = '<!-- config table: generated from packages/cli/src/config.ts by `pnpm docs:config`; do not edit -->';
export const END = '<!-- end of config table -->';

export const MARKDOWN_FILES = ['README.md', 'docs/operations.md', 'packages/cli/README.md'] as const;
export const ENV_EXAMPLE = '.env.example';

/** The file's text with its generated part as it should be (throws when the markers are missing). */
export function expectedText(file: string): string {
  if (file === ENV_EXAMPLE) return envExample();
  const text = readFileSync(join(ROOT, file), 'utf8');
  const begin = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  if (begin === -1 || end === -1 || end < begin) throw new Error(`${file} has no generated config table (markers ${BEGIN} ... ${END})`);
  return `${text.slice(0, begin + BEGIN.length)}\n${configMarkdownTable()}\n${text.slice(end)}`;
}

export function currentText(file: string): string | null {
  try {
    return readFileSync(join(ROOT, file), 'utf8');
  } catch {
    return null;
  }
}

if (process.argv.includes('--write')) {
  for (const file of [...MARKDOWN_FILES, ENV_EXAMPLE]) {
    const expected = expectedText(file);
    if (currentText(file) !== expected) {
      writeFileSync(join(ROOT, file), expected);
      console.log(`updated ${file}`);
    }
  }
}
