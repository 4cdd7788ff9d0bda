/**
 * `cos-admin` end to end, run in process (src/run.ts: the binary's own code path from the
 * argument list to the exit status, with its own environment, stdout and stderr), on a temp
 * SQLite file and on Postgres (TEST_DATABASE_URL): every command of the contract's "Operator
 * interface", its --json output (all of stdout parses as JSON) and its failure messages (exit 1,
 * one line on stderr, nothing on stdout, nothing half-done). What only a process shows (its exit
 * status, the real stdout and stderr, `.env` of its working directory) is in process.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { expect } from 'chai';
import { NACE_SECTIONS } from '@cos/core';
import { printedKeys, runCli, type CliResult, type Env } from './support/cli.js';
import { databaseTargets, suiteDatabase } from './support/databases.js';

const KEY_PATTERN = /^svc_(live|test)_[A-Za-z0-9]{48}$/;
const ORGANISATION_FIELDS = ['created_at', 'id', 'industry_section', 'is_system', 'name', 'slug', 'updated_at'];
const MEMBER_FIELDS = ['created_at', 'email', 'id', 'organisation_id'];
const KEY_FIELDS = ['allowed_cidrs', 'created_at', 'created_by_key_id', 'expires_at', 'id', 'is_active', 'key_prefix', 'label', 'last_used_at', 'metadata', 'organisation_id', 'rate_limit_per_minute', 'revoked_at', 'rolled_from', 'scopes', 'status'];
const ISO_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * A failure as the contract wants it: non-zero exit (2 for a wrong command line, 1 for any other
 * failure), exactly one line on stderr, nothing on stdout.
 */
function expectFailure(r: CliResult, pattern: RegExp, exitCode: 1 | 2 = 1): void {
  expect(r.code, `exit code; stderr: ${r.stderr}`).to.equal(exitCode);
  expect(r.stdout, 'stdout of a failure').to.equal('');
  const lines = r.stderr.split('\n').filter((l) => l !== '');
  expect(lines, `stderr: ${r.stderr}`).to.have.length(1);
  const line = lines[0] as string;
  if (line.startsWith('{')) {
    // --json: {"error", "message"}
    const body = JSON.parse(line) as { error: string; message: string };
    expect(Object.keys(body)).to.deep.equal(['error', 'message']);
    expect(body.message).to.match(pattern);
  } else {
    expect(line).to.match(/^cos-admin: /);
    expect(line).to.match(pattern);
  }
}

for (const target of databaseTargets()) {
  describe(`cos-admin on ${target.name} (Operator interface)`, function () {
    this.timeout(60_000);
    const suite = suiteDatabase(target);
    const { cli, json } = suite;

    let platformOrg: any;
    let platformKey: string;
    let acme: any;

    if (target.name === 'Postgres') {
      it('refuses operator commands while migrations are pending and says to run `cos-admin migrate`', async () => {
        expectFailure(await cli('org', 'list', '--json'), /pending migration.*run `cos-admin migrate`/);
        expectFailure(await cli('bootstrap'), /run `cos-admin migrate`/);
      });

      it('migrate applies the pending migrations once (--json: dialect and names), then has nothing to do', async () => {
        const first = await json('migrate');
        expect(first).to.deep.equal({ dialect: 'postgres', applied: first.applied });
        expect(first.applied).to.include('0001_initial');
        const second = await json('migrate');
        expect(second).to.deep.equal({ dialect: 'postgres', applied: [] });
        const human = await cli('migrate');
        expect(human.code).to.equal(0);
        expect(human.stdout).to.match(/up to date/);
      });
    } else {
      it('a command other than migrate/bootstrap/serve on a missing SQLite file names the path and creates nothing', async () => {
        const path = suite.db.databaseUrl.slice('sqlite:'.length);
        for (const args of [['org', 'list'], ['org', 'list', '--json'], ['audit', 'list'], ['key', 'list', randomUUID()]]) {
          const r = await cli(...args);
          if (args.includes('--json')) {
            expect(r.code).to.equal(1);
            expect(r.stdout).to.equal('');
            expect(JSON.parse(r.stderr)).to.deep.equal({
              error: 'DATABASE_NOT_FOUND',
              message: `no SQLite database at ${path} (DATABASE_URL); check the path, or create it with \`cos-admin migrate\` or \`cos-admin bootstrap\``,
            });
          } else {
            expectFailure(r, /no SQLite database at /);
            expect(r.stderr).to.include(`no SQLite database at ${path} (DATABASE_URL)`);
          }
        }
        expect(existsSync(dirname(path)), 'no directory was created').to.equal(false);
      });

      it('SQLite: migrate creates the file (and its directory), then has nothing to do; later commands find it', async () => {
        const first = await json('migrate');
        expect(first.applied).to.include('0001_initial');
        expect(await json('migrate')).to.deep.equal({ dialect: 'sqlite', applied: [] });
        expect(await json('org', 'list')).to.deep.equal({ data: [], meta: { next_cursor: null } });
      });
    }

    it('bootstrap --json creates the system organisation and prints its platform key once', async () => {
      const r = await cli('bootstrap', '--name', 'Ops Platform', '--slug', 'ops', '--json');
      expect(r.code, r.stderr).to.equal(0);
      const out = JSON.parse(r.stdout);
      expect(out.created).to.equal(true);
      expect(Object.keys(out.organisation).sort()).to.deep.equal(ORGANISATION_FIELDS);
      expect(out.organisation).to.include({ name: 'Ops Platform', slug: 'ops', is_system: true, industry_section: null });
      expect(out.key.key).to.match(KEY_PATTERN);
      expect(out.key.key_prefix).to.equal(out.key.key.slice(0, 12));
      expect(out.key).to.include({ organisation_id: out.organisation.id, status: 'active', is_active: true, label: 'bootstrap' });
      expect(printedKeys(r.stdout)).to.deep.equal([out.key.key]);
      platformOrg = out.organisation;
      platformKey = out.key.key;
    });

    it('bootstrap when a system organisation exists says so, issues nothing and exits 0', async () => {
      const human = await cli('bootstrap');
      expect(human.code).to.equal(0);
      expect(human.stdout).to.match(/already exists/);
      expect(human.stdout).to.include(platformOrg.id);
      expect(human.stdout).to.include(`cos-admin key issue ${platformOrg.id}`);
      expect(printedKeys(human.stdout)).to.deep.equal([]);
      const again = await json('bootstrap');
      expect(again).to.deep.equal({ created: false, organisation: platformOrg });
      const keys = await json('key', 'list', platformOrg.id);
      expect(keys.data).to.have.length(1);
    });

    it('C-22: the bootstrap key is never shown again (key list shows its prefix only)', async () => {
      const r = await cli('key', 'list', platformOrg.id, '--json');
      expect(r.stdout).not.to.include(platformKey);
      const listed = JSON.parse(r.stdout).data[0];
      expect(Object.keys(listed).sort()).to.deep.equal(KEY_FIELDS);
      expect(listed.key_prefix).to.equal(platformKey.slice(0, 12));
    });

    it('C-20: org create --json prints the organisation record', async () => {
      acme = await json('org', 'create', '--name', 'Acme Ltd', '--slug', 'acme');
      expect(Object.keys(acme).sort()).to.deep.equal(ORGANISATION_FIELDS);
      expect(acme).to.include({ name: 'Acme Ltd', slug: 'acme', is_system: false, industry_section: null });
      expect(acme.created_at).to.match(ISO_Z);
    });

    it('org create prints the record for people; --system makes a system organisation', async () => {
      const r = await cli('org', 'create', '--name', 'Globex', '--slug', 'globex');
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.match(/Created organisation/);
      expect(r.stdout).to.match(/slug:\s+globex/);
      const sys = await json('org', 'create', '--name', 'Second Platform', '--slug', 'platform-2', '--system');
      expect(sys.is_system).to.equal(true);
    });

    it('C-13: a duplicate slug fails with one line and changes nothing', async () => {
      const before = await json('org', 'list');
      const auditBefore = await json('audit', 'list', '--kind', 'organisation_created', '--limit', '100');
      expectFailure(await cli('org', 'create', '--name', 'Other', '--slug', 'acme', '--json'), /--slug: already taken/);
      expect(await json('org', 'list')).to.deep.equal(before);
      expect(await json('audit', 'list', '--kind', 'organisation_created', '--limit', '100')).to.deep.equal(auditBefore);
    });

    it('C-11/C-13: invalid name and slug are reported together with the option names', async () => {
      expectFailure(
        await cli('org', 'create', '--name', ' ', '--slug', '-Bad-'),
        /invalid input: --name: .*; --slug: must be 1 to 63 characters/,
        2,
      );
      expectFailure(await cli('org', 'create', '--slug', 'x'), /required option '--name <name>' not specified/, 2);
    });

    it('C-7: org list --json lists every organisation oldest first; the human form is a table', async () => {
      const list = await json('org', 'list');
      expect(list.meta).to.deep.equal({ next_cursor: null });
      expect(list.data.map((o: any) => o.slug)).to.deep.equal(['ops', 'acme', 'globex', 'platform-2']);
      const r = await cli('org', 'list');
      expect(r.code).to.equal(0);
      const lines = r.stdout.trim().split('\n');
      expect(lines[0]).to.match(/^ID\s+SLUG\s+NAME\s+SECTION\s+SYSTEM\s+CREATED$/);
      expect(lines.slice(1, 5).map((l) => l.split(/\s{2,}/)[1])).to.deep.equal(['ops', 'acme', 'globex', 'platform-2']);
    });

    it('C-24: org classify sets a NACE section, `none` clears it, and the audit log records both', async () => {
      const classified = await json('org', 'classify', acme.id, '--section', 'C');
      expect(classified).to.include({ id: acme.id, industry_section: 'C' });
      const human = await cli('org', 'classify', acme.id, '--section', 'J');
      expect(human.stdout).to.match(/J \(Information and communication\)/);
      const cleared = await json('org', 'classify', acme.id, '--section', 'none');
      expect(cleared.industry_section).to.equal(null);
      const updates = await json('audit', 'list', '--org', acme.id, '--kind', 'organisation_updated');
      expect(updates.data).to.have.length(3);
      expect(updates.data.every((e: any) => e.actor.type === 'operator')).to.equal(true);
    });

    it('C-24: org classify rejects a section outside A..U, an unknown and a malformed organisation', async () => {
      expectFailure(await cli('org', 'classify', acme.id, '--section', 'Z'), /option '--section <section>' argument 'Z' is invalid/, 2);
      expectFailure(await cli('org', 'classify', randomUUID(), '--section', 'C', '--json'), /Organisation not found/);
      expectFailure(await cli('org', 'classify', 'not-a-uuid', '--section', 'C'), /command-argument value 'not-a-uuid' is invalid for argument 'org_id'\. Use an id \(UUID\)\./, 2);
      expect((await json('org', 'list')).data.find((o: any) => o.id === acme.id).industry_section).to.equal(null);
    });

    it('C-24: org classify --help lists the sections A..U with their names', async () => {
      const r = await cli('org', 'classify', '--help');
      expect(r.code).to.equal(0);
      for (const [letter, title] of Object.entries(NACE_SECTIONS)) {
        expect(r.stdout).to.include(`${letter}  ${title}`);
      }
      expect(r.stdout).to.match(/none\s+remove the classification/);
    });

    let member: any;
    it('C-21: member add --json prints the member record; member list shows it', async () => {
      member = await json('member', 'add', acme.id, '--email', 'ada@example.com');
      expect(Object.keys(member).sort()).to.deep.equal(MEMBER_FIELDS);
      expect(member).to.include({ organisation_id: acme.id, email: 'ada@example.com' });
      const human = await cli('member', 'add', acme.id, '--email', 'grace@example.com');
      expect(human.code, human.stderr).to.equal(0);
      expect(human.stdout).to.match(/Added member/);
      const list = await json('member', 'list', acme.id);
      expect(list.data.map((m: any) => m.email)).to.deep.equal(['ada@example.com', 'grace@example.com']);
      const table = await cli('member', 'list', acme.id);
      expect(table.stdout).to.match(/^ID\s+E-MAIL\s+CREATED\n/);
      expect(table.stdout).to.include('grace@example.com');
    });

    it('C-21: member add rejects a bad e-mail, a duplicate (any case) and an unknown organisation', async () => {
      expectFailure(await cli('member', 'add', acme.id, '--email', 'not-an-address'), /invalid input: --email: /, 2);
      expectFailure(await cli('member', 'add', acme.id, '--email', 'ADA@example.com', '--json'), /--email: already taken/);
      expectFailure(await cli('member', 'add', randomUUID(), '--email', 'x@example.com'), /Organisation not found/);
      expect((await json('member', 'list', acme.id)).data).to.have.length(2);
    });

    it('C-121: member add refuses an e-mail address holding U+0000 or another control character (exit 2 on its field, never a database error), and adds nobody', async () => {
      const before = (await json('member', 'list', acme.id, '--all')).data.length;
      for (const email of ['a\u0000b@example.com', 'ab@exa\u0000mple.com', 'ab@example.com\u0000x', 'a\u0001b@example.com', 'a\u007fb@example.com']) {
        expectFailure(await cli('member', 'add', acme.id, '--email', email), /invalid input: --email: must be an e-mail address/, 2);
      }
      expect((await json('member', 'list', acme.id, '--all')).data).to.have.length(before);
    });

    it('C-58: member add/remove write member_added/member_removed; the actor is --actor, else the OS user name', async () => {
      const { userInfo } = await import('node:os');
      const added = await json('member', 'add', acme.id, '--email', 'audited@example.com', '--actor', 'alice');
      const removed = await cli('--actor', 'bob', 'member', 'remove', acme.id, added.id);
      expect(removed.code, removed.stderr).to.equal(0);
      const created = await json('org', 'create', '--name', 'Actor Default', '--slug', 'actor-default');
      const log = await json('audit', 'list', '--all');
      const mine = log.data.filter((e: any) => e.member?.id === added.id);
      expect(mine.map((e: any) => ({ kind: e.kind, actor: e.actor, member: e.member, key_id: e.key_id }))).to.deep.equal([
        { kind: 'member_added', actor: { type: 'operator', name: 'alice' }, member: { id: added.id }, key_id: null },
        { kind: 'member_removed', actor: { type: 'operator', name: 'bob' }, member: { id: added.id }, key_id: null },
      ]);
      expect(log.data.find((e: any) => e.organisation_id === created.id).actor).to.deep.equal({ type: 'operator', name: userInfo().username });
      const human = await cli('audit', 'list', '--org', acme.id, '--kind', 'member_removed', '--all');
      expect(human.stdout).to.match(new RegExp(`member_removed .* operator bob +member ${added.id}$`, 'm'));
      expect(human.stdout, 'no e-mail address in the audit log').to.not.include('audited@example.com');
      expectFailure(await cli('member', 'add', acme.id, '--email', 'x@example.com', '--actor', ' '), /--actor must be 1 to 100 characters/, 2);
    });

    it('C-21: member remove removes once; a second time changes nothing and says so (exit 0)', async () => {
      const removed = await json('member', 'remove', acme.id, member.id);
      expect(removed).to.deep.equal({ id: member.id, organisation_id: acme.id, removed: true, changed: true });
      const again = await cli('member', 'remove', acme.id, member.id);
      expect(again.code, again.stderr).to.equal(0);
      expect(again.stdout).to.match(/already removed .*; nothing changed/);
      expect((await json('member', 'list', acme.id)).data.map((m: any) => m.email)).to.deep.equal(['grace@example.com']);
    });

    let issued: any;
    it('C-22/C-23: key issue --json prints the record with the raw key once', async () => {
      const r = await cli('key', 'issue', acme.id, '--label', 'ci pipeline', '--json');
      expect(r.code, r.stderr).to.equal(0);
      issued = JSON.parse(r.stdout);
      expect(Object.keys(issued).sort()).to.deep.equal([...KEY_FIELDS, 'key'].sort());
      expect(issued.key).to.match(/^svc_live_[A-Za-z0-9]{48}$/);
      expect(issued).to.include({ organisation_id: acme.id, label: 'ci pipeline', status: 'active', is_active: true, expires_at: null });
      expect(issued.key_prefix).to.equal(issued.key.slice(0, 12));
      expect(printedKeys(r.stdout)).to.deep.equal([issued.key]);
    });

    it('key issue for people prints the key once and tells the operator to store it now', async () => {
      const r = await cli('key', 'issue', acme.id, '--label', 'people');
      expect(r.code, r.stderr).to.equal(0);
      expect(printedKeys(r.stdout)).to.have.length(1);
      expect(r.stdout).to.match(/Store this key now: it is shown only once/);
    });

    it('C-23: key issue --test gives a svc_test_ key; --expires-in and --expires-at set expires_at', async () => {
      const test = await json('key', 'issue', acme.id, '--label', 'test', '--test');
      expect(test.key).to.match(/^svc_test_/);
      const t0 = Date.now();
      const in90 = await json('key', 'issue', acme.id, '--label', 'quarter', '--expires-in', '90d');
      const expected = t0 + 90 * 86_400_000;
      expect(Date.parse(in90.expires_at)).to.be.within(expected - 1000, expected + 60_000);
      const in12h = await json('key', 'issue', acme.id, '--label', 'half day', '--expires-in', '12h');
      // the expiry is computed from the clock just before issuance: a few ms before created_at
      expect(Date.parse(in12h.expires_at) - Date.parse(in12h.created_at)).to.be.within(12 * 3_600_000 - 5000, 12 * 3_600_000);
      const in30m = await json('key', 'issue', acme.id, '--label', 'short', '--expires-in', '30m');
      expect(Date.parse(in30m.expires_at) - Date.parse(in30m.created_at)).to.be.within(30 * 60_000 - 5000, 30 * 60_000);
      const at = await json('key', 'issue', acme.id, '--label', 'fixed', '--expires-at', '2099-01-01T00:00:00Z');
      expect(at.expires_at).to.equal('2099-01-01T00:00:00.000Z');
    });

    it('C-23: key issue rejects a past expiry, a bad duration, both expiry options and a missing label', async () => {
      const before = (await json('key', 'list', acme.id)).data.length;
      expectFailure(
        await cli('key', 'issue', acme.id, '--label', 'old', '--expires-at', '2020-01-01T00:00:00Z'),
        /invalid input: --expires-at: /,
        2,
      );
      expectFailure(await cli('key', 'issue', acme.id, '--label', 'x', '--expires-in', '90y'), /option '--expires-in <duration>' argument '90y' is invalid/, 2);
      expectFailure(
        await cli('key', 'issue', acme.id, '--label', 'x', '--expires-in', '1d', '--expires-at', '2099-01-01T00:00:00Z'),
        /cannot be used with/,
        2,
      );
      expectFailure(await cli('key', 'issue', acme.id), /required option '--label <label>' not specified/, 2);
      expectFailure(await cli('key', 'issue', randomUUID(), '--label', 'x'), /Organisation not found/);
      expect((await json('key', 'list', acme.id)).data).to.have.length(before);
    });

    it('C-22: key list shows prefixes and statuses, never a raw key', async () => {
      const r = await cli('key', 'list', acme.id, '--json');
      expect(r.code).to.equal(0);
      expect(printedKeys(r.stdout)).to.deep.equal([]);
      const list = JSON.parse(r.stdout);
      expect(list.data.map((k: any) => k.label)).to.deep.equal(['ci pipeline', 'people', 'test', 'quarter', 'half day', 'short', 'fixed']);
      for (const k of list.data) expect(Object.keys(k).sort()).to.deep.equal(KEY_FIELDS);
      const table = await cli('key', 'list', acme.id);
      expect(table.stdout).to.match(/^ID\s+PREFIX\s+LABEL\s+STATUS\s+EXPIRES\s+CREATED\s+LAST USED\s+SCOPES\n/);
      expect(table.stdout).to.include(issued.key_prefix);
      expect(printedKeys(table.stdout)).to.deep.equal([]);
    });

    it('C-35/C-40: key revoke revokes at once, writes one audit entry with the operator as actor, and is idempotent', async () => {
      const revoked = await json('key', 'revoke', acme.id, issued.id);
      expect(revoked).to.include({ id: issued.id, status: 'revoked', is_active: false });
      expect(revoked.revoked_at).to.match(ISO_Z);
      const again = await cli('key', 'revoke', acme.id, issued.id);
      expect(again.code, again.stderr).to.equal(0);
      expect(again.stdout).to.match(/status:\s+revoked/);
      const events = await json('audit', 'list', '--org', acme.id, '--kind', 'api_key_revoked');
      expect(events.data).to.have.length(1);
      expect(events.data[0]).to.deep.include({ key_id: issued.id, key_prefix: issued.key_prefix, actor: { type: 'operator', name: (await import('node:os')).userInfo().username } });
    });

    it('C-34: key revoke of an unknown key id or organisation fails with one line', async () => {
      expectFailure(await cli('key', 'revoke', acme.id, randomUUID()), /API key not found/);
      expectFailure(await cli('key', 'revoke', randomUUID(), issued.id, '--json'), /not found/);
      expectFailure(await cli('key', 'revoke', acme.id, 'nope'), /command-argument value 'nope' is invalid for argument 'key_id'/, 2);
    });

    it('C-41: audit list filters by organisation and kind, pages with --limit/--cursor, oldest first', async () => {
      const all = await json('audit', 'list', '--org', acme.id, '--limit', '100');
      expect(all.data.map((e: any) => e.kind)[0]).to.equal('organisation_created');
      expect(all.data.every((e: any) => e.organisation_id === acme.id)).to.equal(true);
      const issuedEvents = await json('audit', 'list', '--org', acme.id, '--kind', 'api_key_issued', '--limit', '100');
      expect(issuedEvents.data).to.have.length(7);
      const first = await json('audit', 'list', '--org', acme.id, '--limit', '1');
      expect(first.data).to.deep.equal([all.data[0]]);
      expect(first.meta.next_cursor).to.be.a('string');
      const second = await json('audit', 'list', '--org', acme.id, '--limit', '1', '--cursor', first.meta.next_cursor);
      expect(second.data).to.deep.equal([all.data[1]]);
      const human = await cli('audit', 'list', '--org', acme.id, '--limit', '2');
      expect(human.stdout).to.match(/^OCCURRED\s+KIND\s+ORGANISATION\s+KEY PREFIX\s+ACTOR\s+DETAIL\n/);
      expect(human.stdout).to.match(/More entries: cos-admin audit list --org \S+ --limit 2 --cursor \S+/);
    });

    it('C-5: audit list rejects a bad limit, kind, organisation or cursor', async () => {
      expectFailure(await cli('audit', 'list', '--limit', '0'), /option '--limit <n>' argument '0' is invalid. Use a whole number from 1 to 100/, 2);
      expectFailure(await cli('audit', 'list', '--kind', 'nope'), /option '--kind <kind>' argument 'nope' is invalid. Allowed choices are/, 2);
      expectFailure(await cli('audit', 'list', '--org', 'x'), /option '--org <org_id>' argument 'x' is invalid/, 2);
      expectFailure(await cli('audit', 'list', '--cursor', '!!'), /--cursor: /, 2);
    });

    it('C-25: MAX_ACTIVE_KEYS_PER_ORG reaches the core: one key too many is refused', async () => {
      const fresh = await json('org', 'create', '--name', 'Capped', '--slug', 'capped');
      const capped = { ...suite.env, MAX_ACTIVE_KEYS_PER_ORG: '1' };
      expect((await runCli(['key', 'issue', fresh.id, '--label', 'one'], capped, suite.db.cwd)).code).to.equal(0);
      expectFailure(await runCli(['key', 'issue', fresh.id, '--label', 'two'], capped, suite.db.cwd), /1/);
    });

    it('accepts the `--` that `pnpm cos-admin -- …` passes through', async () => {
      const r = await cli('--', 'org', 'list', '--json');
      expect(r.code, r.stderr).to.equal(0);
      expect(JSON.parse(r.stdout).data.length).to.be.greaterThan(0);
    });
  });
}

for (const target of databaseTargets()) {
  // A database of its own, migrated here: the test passes alone (--grep) and whatever else ran.
  describe(`cos-admin paging on ${target.name} (Operator interface)`, function () {
    this.timeout(20_000);
    const { cli, json } = suiteDatabase(target);

    before(async () => {
      await json('migrate');
      // Organisations besides the one paged, so `org list` has pages too.
      for (const slug of ['other-1', 'other-2']) await json('org', 'create', '--name', slug, '--slug', slug);
    });

    it('org list, member list, key list and audit list page with --limit/--cursor, or fetch every page with --all', async () => {
      const paged = await json('org', 'create', '--name', 'Paged', '--slug', 'paged');
      for (const n of [1, 2, 3]) {
        await json('member', 'add', paged.id, '--email', `paging-${n}@example.com`);
        await json('key', 'issue', paged.id, '--label', `paging ${n}`);
      }
      const lists: [string, string[]][] = [
        ['org list', ['org', 'list']],
        [`member list ${paged.id}`, ['member', 'list', paged.id]],
        [`key list ${paged.id}`, ['key', 'list', paged.id]],
        [`audit list --org ${paged.id}`, ['audit', 'list', '--org', paged.id]],
      ];
      for (const [command, args] of lists) {
        const all = await json(...args, '--all');
        expect(all.meta.next_cursor, command).to.equal(null);
        expect(all.data.length, `${command}: enough items to page`).to.be.greaterThan(2);
        expect((await json(...args, '--all', '--limit', '1')).data, `${command} --all --limit 1`).to.deep.equal(all.data);
        // Walked by hand in three or four pages.
        const limit = String(Math.min(100, Math.ceil(all.data.length / 3)));
        const seen: unknown[] = [];
        let cursor: string | null = null;
        do {
          const page: any = await json(...args, '--limit', limit, ...(cursor !== null ? ['--cursor', cursor] : []));
          expect(page.data.length, command).to.be.at.most(Number(limit));
          seen.push(...page.data);
          cursor = page.meta.next_cursor;
        } while (cursor !== null);
        expect(seen, `${command}: the pages together are --all`).to.deep.equal(all.data);
        const human = await cli(...args, '--limit', '1');
        expect(human.code, human.stderr).to.equal(0);
        expect(human.stdout).to.match(new RegExp(`\\nMore \\w+: cos-admin ${command} --limit 1 --cursor \\S+\\n$`));
        expectFailure(await cli(...args, '--all', '--cursor', 'x'), /--all.*cannot be used with option '--cursor|--cursor.*cannot be used with option '--all/, 2);
        expectFailure(await cli(...args, '--limit', '101'), /option '--limit <n>' argument '101' is invalid. Use a whole number from 1 to 100/, 2);
      }
    });
  });
}

describe('cos-admin configuration (Operator interface)', function () {
  this.timeout(30_000);
  const cwd = process.cwd();
  const fail = async (env: Env, pattern: RegExp): Promise<void> => expectFailure(await runCli(['org', 'list', '--json'], env, cwd), pattern);

  it('a bad PORT names the variable and the allowed range', async () => {
    await fail({ DATABASE_URL: 'sqlite::memory:', PORT: 'abc' }, /PORT must be an integer from 0 to 65535/);
    await fail({ DATABASE_URL: 'sqlite::memory:', PORT: '70000' }, /PORT must be an integer from 0 to 65535/);
  });

  it('a bad DATABASE_URL names the variable and never echoes a password', async () => {
    await fail({ DATABASE_URL: 'mysql://root:hunter2@db/cos' }, /DATABASE_URL scheme "mysql:" is not supported/);
    const r = await runCli(['org', 'list'], { DATABASE_URL: 'postgres://root:hunter2@db' }, cwd);
    expectFailure(r, /DATABASE_URL .* names no database/);
    expect(r.stderr).not.to.include('hunter2');
  });

  it('bad values of several variables are all named in one line', async () => {
    await fail(
      { DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'loud', REDIS_URL: 'http://cache', RATE_LIMIT_PER_MINUTE: '0', REDIS_TIMEOUT_MS: '1.5', ERRORS_URL: 'nope' },
      /REDIS_URL must be a redis:\/\/ .*RATE_LIMIT_PER_MINUTE must be an integer of at least 1.*LOG_LEVEL must be one of .*ERRORS_URL must be an http:\/\/ or https:\/\/ URL.*REDIS_TIMEOUT_MS must be an integer from 1 to 60000/,
    );
  });

  it('an unreachable database is one line saying so, nothing on stdout', async () => {
    await fail({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/cos' }, /the database is unavailable .*ECONNREFUSED/);
  });

  it('a .env file in the working directory is read; variables already set win', async () => {
    const { tempDir } = await import('./support/cli.js');
    const { writeFileSync } = await import('node:fs');
    const tmp = tempDir();
    try {
      writeFileSync(`${tmp.dir}/.env`, 'DATABASE_URL=sqlite:./from-dotenv.sqlite\nPORT=not-a-port\n');
      expectFailure(await runCli(['org', 'list'], {}, tmp.dir), /PORT must be an integer/);
      const ok = await runCli(['migrate', '--json'], { PORT: '3001' }, tmp.dir);
      expect(ok.code, ok.stderr).to.equal(0);
      const { existsSync } = await import('node:fs');
      expect(existsSync(`${tmp.dir}/from-dotenv.sqlite`)).to.equal(true);
    } finally {
      tmp.remove();
    }
  });

  it('usage errors (unknown command or option, missing argument or option) exit 2 with one line', async () => {
    const env = { DATABASE_URL: 'sqlite::memory:' };
    expectFailure(await runCli(['org', 'lst'], env, cwd), /unknown command 'lst' \(Did you mean list\?\)/, 2);
    expectFailure(await runCli(['frobnicate'], env, cwd), /unknown command 'frobnicate'/, 2);
    expectFailure(await runCli(['org', 'list', '--bogus'], env, cwd), /unknown option '--bogus'/, 2);
    expectFailure(await runCli(['member', 'list'], env, cwd), /missing required argument 'org_id'/, 2);
    expectFailure(await runCli(['member', 'add', randomUUID()], env, cwd), /required option '--email <email>' not specified/, 2);
    expectFailure(await runCli(['serve', '--port', 'x'], env, cwd), /--port must be an integer/, 2);
    const group = await runCli(['org'], env, cwd);
    expect(group.code, 'a command group without its subcommand').to.equal(2);
    expect(group.stdout).to.equal('');
    expect(group.stderr).to.match(/^Usage: cos-admin org /);
  });

  it('with --json every failure is {"error", "message"} on stderr and stdout stays empty; 2 usage, 1 failure', async () => {
    const cases: [string[], Env, number, string, RegExp][] = [
      [['org', 'lst', '--json'], { DATABASE_URL: 'sqlite::memory:' }, 2, 'USAGE_ERROR', /^unknown command 'lst'/],
      [['org', 'list', '--json', '--bogus'], { DATABASE_URL: 'sqlite::memory:' }, 2, 'USAGE_ERROR', /^unknown option '--bogus'$/],
      [['--json', 'member', 'list'], { DATABASE_URL: 'sqlite::memory:' }, 2, 'USAGE_ERROR', /^missing required argument 'org_id'$/],
      [['org', 'list', '--json'], { DATABASE_URL: 'sqlite::memory:', PORT: 'abc' }, 1, 'CONFIG_ERROR', /^invalid configuration: PORT must be/],
      [['org', 'classify', 'nope', '--section', 'C', '--json'], { DATABASE_URL: 'sqlite::memory:' }, 2, 'USAGE_ERROR', /^command-argument value 'nope' is invalid for argument 'org_id'/],
      [['key', 'list', randomUUID(), '--json'], { DATABASE_URL: 'sqlite::memory:' }, 1, 'NOT_FOUND', /^Organisation not found$/],
      // C-160: an id argument is judged before any store is reached (this Postgres is down).
      [['key', 'revoke', randomUUID(), 'zzz', '--json'], { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/cos' }, 2, 'USAGE_ERROR', /^command-argument value 'zzz' is invalid for argument 'key_id'\. Use an id \(UUID\)\.$/],
      [['org', 'list', '--json'], { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/cos' }, 1, 'SERVICE_UNAVAILABLE', /^the database is unavailable/],
    ];
    for (const [args, env, exitCode, error, message] of cases) {
      const r = await runCli(args, env, cwd);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(exitCode);
      expect(r.stdout, args.join(' ')).to.equal('');
      const lines = r.stderr.split('\n').filter((l) => l !== '');
      expect(lines, r.stderr).to.have.length(1);
      const body = JSON.parse(lines[0] as string) as Record<string, unknown>;
      expect(Object.keys(body)).to.deep.equal(['error', 'message']);
      expect(body['error'], args.join(' ')).to.equal(error);
      expect(body['message']).to.match(message);
    }
  });

  it('--help documents the exit statuses and the --json error form', async () => {
    const r = await runCli(['--help'], {}, cwd);
    expect(r.stdout).to.match(/Exit status: 0 on success; 2 when the command line is wrong/);
    expect(r.stdout).to.include('{"error": "<CODE>", "message": "<message>"}');
  });

  it('--help lists every command of the contract and the configuration table', async () => {
    const r = await runCli(['--help'], {}, cwd);
    expect(r.code).to.equal(0);
    for (const c of ['migrate', 'bootstrap', 'serve', 'org', 'member', 'key', 'audit']) expect(r.stdout).to.match(new RegExp(`\\n  ${c} `));
    for (const v of ['DATABASE_URL', 'REDIS_URL', 'HOST', 'PORT', 'RATE_LIMIT_PER_MINUTE', 'UNAUTH_RATE_LIMIT_PER_MINUTE', 'LOG_LEVEL', 'MAX_ACTIVE_KEYS_PER_ORG', 'ERRORS_URL', 'REDIS_TIMEOUT_MS']) {
      expect(r.stdout).to.include(v);
    }
    for (const sub of [['org', 'create', 'list', 'classify'], ['member', 'add', 'remove', 'list'], ['key', 'issue', 'list', 'revoke'], ['audit', 'list']]) {
      const h = await runCli([sub[0] as string, '--help'], {}, cwd);
      for (const s of sub.slice(1)) expect(h.stdout).to.match(new RegExp(`\\n  ${s} `));
    }
  });
});
