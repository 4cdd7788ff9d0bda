/** What commands print: JSON alone on stdout with --json, otherwise text and tables for people. */
import { currentIo } from './io.js';

function writeOut(text: string): void {
  currentIo().stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}

function writeJson(value: unknown): void {
  currentIo().stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Prints `value` as JSON when `json`, else the human text `human()` returns. */
export function emit(json: boolean, value: unknown, human: () => string): void {
  if (json) writeJson(value);
  else writeOut(human());
}

/** A plain left-aligned table with a header row; an empty list prints `empty`. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[], empty: string): string {
  if (rows.length === 0) return empty;
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** `key: value` lines with aligned values. */
export function fields(pairs: readonly (readonly [string, string])[]): string {
  const width = Math.max(...pairs.map(([k]) => k.length)) + 1;
  return pairs.map(([k, v]) => `  ${`${k}:`.padEnd(width)} ${v}`).join('\n');
}

export const orNone = (v: string | null, none = '-'): string => (v === null ? none : v);
