import { Option, type Command } from 'commander';
import ms from 'ms';
import { apiKeyView, exceedsPolicy, issuedKeyView, keyStatus, listView, OPERATOR, type ApiKey, type Core } from '@cos/core';
import { CliError } from '../errors.js';
import { emit, fields, orNone, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { STORE_KEY_NOW } from './bootstrap.js';
import { fetchPaged, jsonWanted, nextPageCommand, plural, withJson, withPaging, type PagingOptions } from './shared.js';

/**
 * The duration forms the CLI documents: a whole number and one unit letter, nothing else. `ms`
 * converts; these patterns gate first, because `ms` alone would also take forms the docs do not
 * promise and that would mislead: `1.5h`, `2 weeks`, `1y`, `-1d`, `1D`, and a bare number as
 * milliseconds (`--grace 3600` would be 3.6 s, not an hour).
 */
const EXPIRY = /^\d{1,6}[dhm]$/;
const GRACE = /^(?:0|\d{1,7}[dhms])$/;

/** `90d`, `12h`, `30m` -> milliseconds (`option` names the flag in the error). */
export function parseDuration(text: string, option = '--expires-in'): number {
  const value = EXPIRY.test(text.trim()) ? ms(text.trim() as ms.StringValue) : 0;
  if (value < 1) {
    throw new CliError(`invalid ${option} "${text}": use a whole number followed by d, h or m (e.g. 90d, 12h, 30m)`, { usage: true });
  }
  return value;
}

/** `--grace`: `0`, or a whole number followed by d, h, m or s -> seconds (the core checks 0..604800). */
export function parseGrace(text: string, option = '--grace'): number {
  if (!GRACE.test(text.trim())) {
    throw new CliError(`invalid ${option} "${text}": use 0 or a whole number followed by d, h, m or s (e.g. 24h, 90m)`, { usage: true });
  }
  return ms(text.trim() as ms.StringValue) / 1000;
}

/** `--unused-for`: active keys whose last use (or, never used, whose creation) is before `cutoff`. */
function isStale(k: ApiKey, now: Date, cutoff: number): boolean {
  return keyStatus(k, now) === 'active' && (k.lastUsedAt ?? k.createdAt).getTime() < cutoff;
}

/**
 * `--scopes a,b`: the names as given (trimmed; empty entries dropped), for the core to check (known,
 * no duplicates, non-empty: 400 `scopes`). An empty list is kept so the core reports it.
 */
export function parseScopes(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/**
 * The keys `root` issued or rolled (C-61): its children, or with `transitive` every descendant,
 * found among `keys` (every key of the organisation), in list order.
 */
export function createdBy(keys: readonly ApiKey[], root: string, transitive: boolean): ApiKey[] {
  const wanted = new Set([root.toLowerCase()]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const k of keys) {
      const parent = k.createdByKeyId?.toLowerCase();
      if (parent !== undefined && wanted.has(parent) && !wanted.has(k.id) && (transitive || parent === root.toLowerCase())) {
        wanted.add(k.id);
        grew = transitive;
      }
    }
  }
  return keys.filter((k) => k.id !== root.toLowerCase() && wanted.has(k.id));
}

function keyRows(k: ApiKey, core: Core): (readonly [string, string])[] {
  const v = apiKeyView(k, core.clock.now());
  return [
    ['id', v.id],
    ['organisation', v.organisation_id],
    ['label', v.label],
    ['prefix', v.key_prefix],
    ['status', v.status],
    ['expires at', orNone(v.expires_at, 'never')],
    ['created at', v.created_at],
    ...(v.revoked_at !== null ? [['revoked at', v.revoked_at] as const] : []),
    ['last used at', orNone(v.last_used_at, 'never')],
    ...(v.rolled_from !== null ? [['rolled from', v.rolled_from] as const] : []),
    ['scopes', v.scopes.join(', ')],
    ['created by', orNone(v.created_by_key_id, 'operator')],
  ];
}

interface ListOptions extends PagingOptions {
  unusedFor?: string;
  createdBy?: string;
  transitive?: boolean;
  exceedingPolicy?: boolean;
}

interface RollOptions {
  grace?: string;
  label?: string;
  scopes?: string;
}

interface IssueOptions {
  label: string;
  test?: boolean;
  expiresAt?: string;
  expiresIn?: string;
  scopes?: string;
}

export function registerKey(program: Command): void {
  const key = program.command('key').description('API keys of an organisation: issue, list, roll, revoke');

  withJson(
    key
      .command('issue')
      .description('issue an API key (a platform key when the organisation is a system organisation); the key is printed once')
      .argument('<org_id>', 'organisation id (UUID)')
      .requiredOption('--label <label>', 'free-text label (1 to 100 characters)')
      .option('--test', 'a test key (prefix svc_test_) instead of a live one (svc_live_)')
      .addOption(new Option('--expires-at <iso>', 'expiry as an ISO 8601 timestamp in the future').conflicts('expiresIn'))
      .addOption(new Option('--expires-in <duration>', 'expiry from now: 90d, 12h or 30m').conflicts('expiresAt'))
      .option(
        '--scopes <scopes>',
        'comma-separated scopes the key holds, e.g. organisations:read,api_keys:read (default: all of them); fixed for the life of the key',
      )
      .action(async (orgId: string, opts: IssueOptions, cmd: Command) => {
        const expiresInMs = opts.expiresIn !== undefined ? parseDuration(opts.expiresIn) : undefined;
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const expiresAt =
            expiresInMs !== undefined ? new Date(core.clock.now().getTime() + expiresInMs).toISOString() : opts.expiresAt;
          const issued = await core.apiKeys.issue(operator, orgId, {
            label: opts.label,
            environment: opts.test === true ? 'test' : 'live',
            ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}),
            ...(opts.scopes !== undefined ? { scopes: parseScopes(opts.scopes) } : {}),
          });
          emit(json, issuedKeyView(issued, core.clock.now()), () =>
            [`Issued API key:`, fields(keyRows(issued.key, core)), '', `  ${issued.rawKey}`, '', STORE_KEY_NOW].join('\n'),
          );
        });
      }),
  );

  withJson(
    withPaging(
      key
        .command('list')
        .description('list the API keys of an organisation, a page at a time (--all: every one); prefixes only: raw keys are never shown again')
        .argument('<org_id>', 'organisation id (UUID)'),
      'keys',
      'key',
    )
      .option(
        '--unused-for <duration>',
        'only active keys not used for that long (never used: created that long ago), e.g. 90d; looks through every key of the organisation (as --all); last use is accurate to 60 s',
      )
      .option('--created-by <key_id>', 'only keys that key issued or rolled (any status); looks through every key of the organisation (as --all)')
      .option('--transitive', 'with --created-by: also the keys those keys issued or rolled, and so on')
      .option(
        '--exceeding-policy',
        "only active keys that would not be issued today under the organisation's key policy (environment not allowed, or expiry further off than its maximum lifetime); looks through every key (as --all)",
      )
      .action(async (orgId: string, opts: ListOptions, cmd: Command) => {
        const unusedForMs = opts.unusedFor !== undefined ? parseDuration(opts.unusedFor, '--unused-for') : undefined;
        if (opts.transitive === true && opts.createdBy === undefined) throw new CliError('--transitive needs --created-by', { usage: true });
        const filtered = unusedForMs !== undefined || opts.createdBy !== undefined || opts.exceedingPolicy === true;
        await runCommand(jsonWanted(cmd), async ({ core, json }) => {
          const fetched = await fetchPaged(filtered ? { limit: opts.limit, all: true } : opts, (query) => core.apiKeys.list(OPERATOR, orgId, query));
          const now = core.clock.now();
          let items = fetched.items;
          if (unusedForMs !== undefined) items = items.filter((k) => isStale(k, now, now.getTime() - unusedForMs));
          if (opts.createdBy !== undefined) {
            // The walk goes through every key (a key filtered out above may still link its descendants).
            const lineage = new Set(createdBy(fetched.items, opts.createdBy, opts.transitive === true).map((k) => k.id));
            items = items.filter((k) => lineage.has(k.id));
          }
          if (opts.exceedingPolicy === true) {
            const policy = await core.keyPolicies.get(OPERATOR, orgId);
            items = items.filter((k) => exceedsPolicy(k, policy, now));
          }
          const page = filtered ? { items, nextCursor: null } : fetched;
          const all = page.items;
          const views = all.map((k) => apiKeyView(k, now));
          emit(json, listView(page, (k) => apiKeyView(k, now)), () =>
            [
              table(
                ['ID', 'PREFIX', 'LABEL', 'STATUS', 'EXPIRES', 'CREATED', 'LAST USED', 'SCOPES'],
                views.map((v) => [
                  v.id,
                  v.key_prefix,
                  v.label,
                  v.status,
                  orNone(v.expires_at, 'never'),
                  v.created_at,
                  orNone(v.last_used_at, 'never'),
                  v.scopes.join(','),
                ]),
                filtered ? 'No API key matches.' : 'No API keys.',
              ),
              ...(all.length > 0 && page.nextCursor === null ? [`(${plural(all.length, 'key')}, ${views.filter((v) => v.is_active).length} active)`] : []),
              ...(page.nextCursor !== null ? [`More keys: ${nextPageCommand(`key list ${orgId}`, { limit: opts.limit }, page.nextCursor)}`] : []),
            ].join('\n'),
          );
        });
      }),
  );

  withJson(
    key
      .command('roll')
      .description('replace a key with a new one (same environment, label and expiry); the old key stops after the grace period')
      .argument('<org_id>', 'organisation id (UUID)')
      .argument('<key_id>', 'id of the key to replace (UUID)')
      .option('--grace <duration>', 'how long the old key keeps working: 0 (default: it is revoked now) up to 7d, e.g. 24h')
      .option('--label <label>', "the new key's label (default: the old key's)")
      .option('--scopes <scopes>', "comma-separated scopes of the new key (default: the old key's), e.g. organisations:read")
      .action(async (orgId: string, keyId: string, opts: RollOptions, cmd: Command) => {
        const grace = opts.grace !== undefined ? parseGrace(opts.grace) : 0;
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const rolled = await core.apiKeys.roll(operator, orgId, keyId, {
            grace_period_seconds: grace,
            ...(opts.label !== undefined ? { label: opts.label } : {}),
            ...(opts.scopes !== undefined ? { scopes: parseScopes(opts.scopes) } : {}),
          });
          const old = await core.apiKeys.get(OPERATOR, orgId, keyId);
          const oldView = apiKeyView(old, core.clock.now());
          const oldEnd = oldView.status === 'active' ? `works until ${orNone(oldView.expires_at, 'never')}` : oldView.status;
          emit(json, issuedKeyView(rolled, core.clock.now()), () =>
            [`Rolled API key ${keyId} (old key: ${oldEnd}); new key:`, fields(keyRows(rolled.key, core)), '', `  ${rolled.rawKey}`, '', STORE_KEY_NOW].join(
              '\n',
            ),
          );
        });
      }),
  );

  withJson(
    key
      .command('revoke')
      .description('revoke an API key at once and for good (revoking a revoked key changes nothing)')
      .argument('<org_id>', 'organisation id (UUID)')
      .argument('<key_id>', 'key id (UUID)')
      .action(async (orgId: string, keyId: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          await core.apiKeys.revoke(operator, orgId, keyId);
          const revoked = await core.apiKeys.get(OPERATOR, orgId, keyId);
          emit(json, apiKeyView(revoked, core.clock.now()), () => `Revoked API key:\n${fields(keyRows(revoked, core))}`);
        });
      }),
  );
}
