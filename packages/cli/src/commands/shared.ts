import { Option, type Command } from 'commander';
import { isDomainError, OPERATOR, type Core, type Page } from '@cos/core';
import { pageSize } from '../values.js';

/**
 * Every command takes --json (contract, "Operator interface"): it is the program's global option,
 * taken anywhere on the command line and listed under "Global Options" in every command's help.
 * This marks the commands that honour it.
 */
export function withJson(cmd: Command): Command {
  return cmd;
}

/** True when --json was given on the command or before it. */
export function jsonWanted(cmd: Command): boolean {
  return cmd.optsWithGlobals<{ json?: boolean }>().json === true;
}

/** Largest page the contract allows (C-5): `--all` fetches every page with it. */
const PAGE_SIZE = '100';

/** The paging options of a list command. */
export interface PagingOptions {
  limit?: string;
  cursor?: string;
  all?: boolean;
}

/** Adds --limit, --cursor and --all to a list command; `what` and `one` name its items ("organisations", "organisation"). */
export function withPaging(cmd: Command, what: string, one: string): Command {
  return cmd
    .addOption(new Option('--limit <n>', `at most this many ${what} per page (1 to 100, default 20)`).argParser(pageSize))
    .addOption(new Option('--cursor <cursor>', 'continue after the previous page (its next_cursor)').conflicts('all'))
    .addOption(new Option('--all', `every ${one}, following each next_cursor to the last page`).conflicts('cursor'));
}

/**
 * One page as asked (`--limit`, `--cursor`; the core's default size without `--limit`), or with
 * `--all` every page (`--limit` then sets the size of each fetch) as one page without a next cursor.
 */
export async function fetchPaged<T>(
  opts: PagingOptions,
  fetchPage: (query: { limit?: string; cursor?: string }) => Promise<Page<T>>,
): Promise<Page<T>> {
  if (opts.all === true) {
    const items = await collectAll((cursor) => fetchPage({ limit: opts.limit ?? PAGE_SIZE, ...(cursor !== undefined ? { cursor } : {}) }));
    return { items, nextCursor: null };
  }
  return fetchPage({
    ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
    ...(opts.cursor !== undefined ? { cursor: opts.cursor } : {}),
  });
}

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

/** True for the core's "not found" failure (404 over HTTP). */
export function isNotFound(e: unknown): boolean {
  return isDomainError(e) && e.code === 'NOT_FOUND';
}

/**
 * Runs `work` on something of organisation `orgId` (a key, a member). When it is not found and the
 * organisation itself does not exist, the failure names the organisation ("Organisation not
 * found"), not the thing looked for in it.
 */
export async function inOrganisation<T>(core: Core, orgId: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (e) {
    if (isNotFound(e)) await core.organisations.get(OPERATOR, orgId);
    throw e;
  }
}
