import { Option, type Command } from 'commander';
import { apiKeyView, exceedsPolicy, issuedKeyView, keysCreatedBy, keyStatus, listView, MAX_EXPIRING_WITHIN_SECONDS, MAX_ROLL_GRACE_SECONDS, OPERATOR, type ApiKey, type Core } from '@cos/core';
import { CliError } from '../errors.js';
import { currentIo } from '../io.js';
import { emit, fields, orNone, table } from '../output.js';
import { runCommand } from '../runtime.js';
import { DURATION_GRAMMAR, durationMs, durationSeconds, limitPerMinute, TIMESTAMP_GRAMMAR, timestamp, uuid } from '../values.js';
import { STORE_KEY_NOW } from './bootstrap.js';
import { registerKeyUsage } from './key-usage.js';
import { fetchPaged, inOrganisation, jsonWanted, nextPageCommand, plural, withJson, withPaging, type PagingOptions } from './shared.js';

/** `--unused-for`: active keys whose last use (or, never used, whose creation) is before `cutoff`. */
function isStale(k: ApiKey, now: Date, cutoff: number): boolean {
  return keyStatus(k, now) === 'active' && (k.lastUsedAt ?? k.createdAt).getTime() < cutoff;
}

/**
 * `--scopes a,b`: the names as given (trimmed; empty entries dropped), for the core to check (known,
 * no duplicates, non-empty: 400 `scopes`). An empty list is kept so the core reports it.
 */
function parseScopes(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
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
    ['allowed from', v.allowed_cidrs === null ? 'any address' : v.allowed_cidrs.join(', ')],
    ['rate limit', v.rate_limit_per_minute === null ? "the organisation's" : `${v.rate_limit_per_minute} per minute`],
    ...Object.entries(v.metadata).map(([name, value]) => [`metadata ${name}`, value] as const),
  ];
}

interface UpdateOptions {
  label?: string;
  metadata: string[];
  unsetMetadata: string[];
  allowedCidrs?: string;
  rateLimit?: { readonly perMinute: number | null };
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** `--metadata name=value` (split at the first '='): a value without '=' is a usage error. */
function metadataPair(text: string): [string, string] {
  const at = text.indexOf('=');
  if (at <= 0) throw new CliError(`--metadata ${text}: expected name=value`, { usage: true });
  return [text.slice(0, at), text.slice(at + 1)];
}

/**
 * The PATCH body of `key update`, and how the operator wrote each field it names (so a refused
 * value is reported as the flag, and exits 2).
 */
function updateBody(opts: UpdateOptions): { body: Record<string, unknown>; labels: Record<string, string> } {
  const labels: Record<string, string> = {};
  const entries: [string, string | null][] = opts.metadata.map(metadataPair);
  for (const name of opts.unsetMetadata) entries.push([name, null]);
  for (const [name] of entries) labels[`metadata.${name}`] = `--metadata ${name}`;
  let allowedCidrs: string[] | null | undefined;
  if (opts.allowedCidrs !== undefined) {
    allowedCidrs = opts.allowedCidrs.trim() === 'any' ? null : opts.allowedCidrs.split(',').map((c) => c.trim());
    allowedCidrs?.forEach((c, i) => (labels[`allowed_cidrs.${i}`] = `--allowed-cidrs ${c}`));
  }
  const body: Record<string, unknown> = {
    ...(opts.label !== undefined ? { label: opts.label } : {}),
    // fromEntries defines own properties, so a name such as `__proto__` is sent as given.
    ...(entries.length > 0 ? { metadata: Object.fromEntries(entries) } : {}),
    ...(allowedCidrs !== undefined ? { allowed_cidrs: allowedCidrs } : {}),
    ...(opts.rateLimit !== undefined ? { rate_limit_per_minute: opts.rateLimit.perMinute } : {}),
  };
  if (opts.rateLimit !== undefined) labels.rate_limit_per_minute = '--rate-limit';
  return { body, labels };
}

interface ListOptions extends PagingOptions {
  unusedFor?: number;
  createdBy?: string;
  transitive?: boolean;
  exceedingPolicy?: boolean;
  expiringWithin?: { readonly seconds: number; readonly text: string };
}

/** `--expiring-within`: the duration in seconds, and as written (for the next page's command); at most the API's bound. */
const EXPIRING_WITHIN_MAX = { ms: MAX_EXPIRING_WITHIN_SECONDS * 1000, text: `${MAX_EXPIRING_WITHIN_SECONDS / 86_400}d` };
function expiringWithin(text: string): { readonly seconds: number; readonly text: string } {
  return { seconds: durationSeconds({ max: EXPIRING_WITHIN_MAX })(text), text: text.trim() };
}

interface RollOptions {
  grace: number;
  label?: string;
  scopes?: string;
}

interface IssueOptions {
  label: string;
  test?: boolean;
  expiresAt?: Date;
  expiresIn?: number;
  scopes?: string;
  metadata: string[];
  allowedCidrs?: string;
  rateLimit?: { readonly perMinute: number | null };
}

/** `--rate-limit`: a key's own limit per minute, or `none`. */
const keyLimit = limitPerMinute('none');

export function registerKey(program: Command): void {
  const key = program.command('key').description('API keys of an organisation: issue, list, roll, update, revoke, usage');

  withJson(
    key
      .command('issue')
      .description('issue an API key (a platform key when the organisation is a system organisation); the key is printed once')
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .requiredOption('--label <label>', 'free-text label (1 to 100 characters)')
      .option('--test', 'a test key (prefix svc_test_) instead of a live one (svc_live_)')
      .addOption(new Option('--expires-at <time>', `expiry, in the future: ${TIMESTAMP_GRAMMAR}`).argParser(timestamp).conflicts('expiresIn'))
      .addOption(new Option('--expires-in <duration>', `expiry from now, ${DURATION_GRAMMAR}`).argParser(durationMs()).conflicts('expiresAt'))
      .option(
        '--scopes <scopes>',
        'comma-separated scopes the key holds, e.g. organisations:read,api_keys:read (default: all of them); fixed for the life of the key',
      )
      .option('--metadata <name=value>', 'one metadata entry (repeatable); names of 1 to 40 characters of A-Z a-z 0-9 _ . -, values up to 500 characters', collect, [])
      .option('--allowed-cidrs <cidrs>', "comma-separated IPv4/IPv6 networks the key may be used from, e.g. 203.0.113.0/24 (default: any address)")
      .option('--rate-limit <n>', "the key's own limit, requests per UTC minute from 1 to 1000000, at most the organisation's (default: none)", keyLimit)
      .action(async (orgId: string, opts: IssueOptions, cmd: Command) => {
        const attributes = updateBody({
          metadata: opts.metadata,
          unsetMetadata: [],
          ...(opts.allowedCidrs !== undefined ? { allowedCidrs: opts.allowedCidrs } : {}),
          ...(opts.rateLimit !== undefined ? { rateLimit: opts.rateLimit } : {}),
        });
        // --expires-in is sent as an expiry time: a refusal of it names the flag the operator typed.
        currentIo().state.labels = { ...attributes.labels, ...(opts.expiresIn !== undefined ? { expires_at: '--expires-in' } : {}) };
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const expiresAt =
            opts.expiresIn !== undefined ? new Date(core.clock.now().getTime() + opts.expiresIn).toISOString() : opts.expiresAt?.toISOString();
          const issued = await core.apiKeys.issue(operator, orgId, {
            label: opts.label,
            environment: opts.test === true ? 'test' : 'live',
            ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}),
            ...(opts.scopes !== undefined ? { scopes: parseScopes(opts.scopes) } : {}),
            ...attributes.body,
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
        .argument('<org_id>', 'organisation id (UUID)', uuid),
      'keys',
      'key',
    )
      .option(
        '--unused-for <duration>',
        `only active keys not used for that long (never used: created that long ago), ${DURATION_GRAMMAR}, e.g. 90d; looks through every key of the organisation (as --all); last use is accurate to 60 s`,
        durationMs(),
      )
      .option('--created-by <key_id>', 'only keys that key issued or rolled (any status); looks through every key of the organisation (as --all)', uuid)
      .option('--transitive', 'with --created-by: also the keys those keys issued or rolled, and so on, through keys of any organisation')
      .option(
        '--exceeding-policy',
        "only active keys that would not be issued today under the organisation's key policy (environment not allowed, or expiry further off than its maximum lifetime); looks through every key (as --all)",
      )
      .option(
        '--expiring-within <duration>',
        `only active keys that expire within that long from now, ${DURATION_GRAMMAR}, e.g. 7d (the API's expiring_within)`,
        expiringWithin,
      )
      .action(async (orgId: string, opts: ListOptions, cmd: Command) => {
        const unusedForMs = opts.unusedFor;
        // Filtered by the core as the API's `expiring_within` (whole seconds), so pages stay pages.
        const expiring = opts.expiringWithin === undefined ? {} : { expiring_within: String(opts.expiringWithin.seconds) };
        if (opts.transitive === true && opts.createdBy === undefined) throw new CliError('--transitive needs --created-by', { usage: true });
        const filtered = unusedForMs !== undefined || opts.createdBy !== undefined || opts.exceedingPolicy === true;
        await runCommand(jsonWanted(cmd), async ({ core, store, json }) => {
          const fetched = await fetchPaged(filtered ? { limit: opts.limit, all: true } : opts, (query) =>
            core.apiKeys.list(OPERATOR, orgId, { ...query, ...expiring }),
          );
          const now = core.clock.now();
          let items = fetched.items;
          if (unusedForMs !== undefined) items = items.filter((k) => isStale(k, now, now.getTime() - unusedForMs));
          if (opts.createdBy !== undefined) {
            // The core's lineage walk, through every organisation and key state (a key in another
            // organisation, or filtered out above, may still link this organisation's keys to it).
            const lineage = new Set((await keysCreatedBy(store.stores, opts.createdBy, { transitive: opts.transitive === true })).map((k) => k.id));
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
                filtered || opts.expiringWithin !== undefined ? 'No API key matches.' : 'No API keys.',
              ),
              ...(all.length > 0 && page.nextCursor === null ? [`(${plural(all.length, 'key')}, ${views.filter((v) => v.is_active).length} active)`] : []),
              ...(page.nextCursor !== null
                ? [`More keys: ${nextPageCommand(`key list ${orgId}`, { limit: opts.limit, 'expiring-within': opts.expiringWithin?.text }, page.nextCursor)}`]
                : []),
            ].join('\n'),
          );
        });
      }),
  );

  withJson(
    key
      .command('roll')
      .description(
        "replace a key with a new one (same environment, label and expiry, the expiry capped at now + the key policy's maximum lifetime when it has one); the old key stops after the grace period",
      )
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .argument('<key_id>', 'id of the key to replace (UUID)', uuid)
      .option(
        '--grace <duration>',
        `how long the old key keeps working: 0 (it is revoked now) or ${DURATION_GRAMMAR}, at most 7d`,
        durationSeconds({ zero: true, max: { ms: MAX_ROLL_GRACE_SECONDS * 1000, text: '7d' } }),
        0,
      )
      .option('--label <label>', "the new key's label (default: the old key's)")
      .option('--scopes <scopes>', "comma-separated scopes of the new key (default: the old key's), e.g. organisations:read")
      .action(async (orgId: string, keyId: string, opts: RollOptions, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const rolled = await inOrganisation(core, orgId, () =>
            core.apiKeys.roll(operator, orgId, keyId, {
              grace_period_seconds: opts.grace,
              ...(opts.label !== undefined ? { label: opts.label } : {}),
              ...(opts.scopes !== undefined ? { scopes: parseScopes(opts.scopes) } : {}),
            }),
          );
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
      .command('update')
      .description(
        "change a key's label, metadata, allowed networks or own rate limit (scopes, environment and expiry are fixed: roll the key instead); takes effect on the next request at every instance",
      )
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .argument('<key_id>', 'key id (UUID)', uuid)
      .option('--label <label>', 'the new label (1 to 100 characters)')
      .option('--metadata <name=value>', 'set one metadata entry (repeatable); names of 1 to 40 characters of A-Z a-z 0-9 _ . -, values up to 500 characters', collect, [])
      .option('--unset-metadata <name>', 'remove one metadata entry (repeatable)', collect, [])
      .option('--allowed-cidrs <cidrs>', "comma-separated IPv4/IPv6 networks the key may be used from, e.g. 203.0.113.0/24,2001:db8::/32; 'any' lifts the restriction")
      .option('--rate-limit <n>', "the key's own limit, requests per UTC minute from 1 to 1000000, at most the organisation's; 'none' removes it", keyLimit)
      .action(async (orgId: string, keyId: string, opts: UpdateOptions, cmd: Command) => {
        const { body, labels } = updateBody(opts);
        if (Object.keys(body).length === 0) {
          throw new CliError('nothing to change: give --label, --metadata, --unset-metadata, --allowed-cidrs or --rate-limit', { usage: true });
        }
        currentIo().state.labels = labels;
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const updated = await inOrganisation(core, orgId, () => core.apiKeys.update(operator, orgId, keyId, body));
          emit(json, apiKeyView(updated, core.clock.now()), () => `Updated API key:\n${fields(keyRows(updated, core))}`);
        });
      }),
  );

  withJson(
    key
      .command('revoke')
      .description(
        'revoke an API key at once and for good; revoking a revoked key changes nothing and exits 0 (says so; --json: "changed": false)',
      )
      .argument('<org_id>', 'organisation id (UUID)', uuid)
      .argument('<key_id>', 'key id (UUID)', uuid)
      .action(async (orgId: string, keyId: string, _opts: unknown, cmd: Command) => {
        await runCommand(jsonWanted(cmd), async ({ core, json, operator }) => {
          const before = await inOrganisation(core, orgId, () => core.apiKeys.get(OPERATOR, orgId, keyId));
          const changed = before.revokedAt === null || before.revokedAt.getTime() > core.clock.now().getTime();
          await core.apiKeys.revoke(operator, orgId, keyId);
          const revoked = await core.apiKeys.get(OPERATOR, orgId, keyId);
          emit(json, { ...apiKeyView(revoked, core.clock.now()), changed }, () =>
            changed
              ? `Revoked API key:\n${fields(keyRows(revoked, core))}`
              : `API key ${revoked.id} was already revoked; nothing changed:\n${fields(keyRows(revoked, core))}`,
          );
        });
      }),
  );
  registerKeyUsage(key);
}
