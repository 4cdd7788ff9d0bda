import type { Command } from 'commander';
import type { Page } from '@cos/core';

/** Every command takes --json (contract, "Operator interface"). */
export function withJson(cmd: Command): Command {
  return cmd.option('--json', 'print machine-readable JSON on stdout (and nothing else there)');
}

/** True when --json was given on the command or before it. */
export function jsonWanted(cmd: Command): boolean {
  return cmd.optsWithGlobals<{ json?: boolean }>().json === true;
}

/** Largest page the contract allows (C-5): lists fetch every page with it. */
export const PAGE_SIZE = '100';

/** Follows next_cursor from the first page to the last (C-6) and returns every item. */
export async function collectAll<T>(fetchPage: (cursor: string | undefined) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | undefined;
  do {
    const page = await fetchPage(cursor);
    items.push(...page.items);
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
  return items;
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/**
 * The command that prints the next page of a paged list (`--cursor` last), for the human output:
 * `options` are the list's own options as given (flag name -> value), in order.
 */
export function nextPageCommand(command: string, options: Readonly<Record<string, string | undefined>>, cursor: string): string {
  const parts = [`cos-admin ${command}`];
  for (const [flag, value] of Object.entries(options)) if (value !== undefined) parts.push(`--${flag} ${value}`);
  parts.push(`--cursor ${cursor}`);
  return parts.join(' ');
}
