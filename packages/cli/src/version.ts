import { readFileSync } from 'node:fs';

let cached: string | undefined;

/** The service version: the `version` of packages/cli/package.json (one level above src/ and dist/). */
export function serviceVersion(): string {
  if (cached === undefined) {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    cached = typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  }
  return cached;
}
