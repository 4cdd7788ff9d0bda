/**
 * One way for every option (operations guide, "cos-admin"): malformed or invalid option values exit
 * 2 naming the option and change nothing; timestamps take a date; "not found" names what is missing;
 * removals of what is already gone exit 0 saying nothing changed; every list command takes --all;
 * every command's help shows the global options. Commands run in-process on a fresh SQLite file.
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { expect } from 'chai';
import type { Command } from 'commander';
import { buildProgram } from '../src/program.js';
import { EXIT_USAGE } from '../src/errors.js';
import { runCli, tempDir, type CliResult } from './support/cli.js';

describe('cos-admin: one way for every option (in-process, SQLite)', function () {
  const tmp = tempDir('cos-cli-consistency-');
  const env = { DATABASE_URL: `sqlite:${join(tmp.dir, 'cos.sqlite')}` };
  const cli = (...args: string[]): Promise<CliResult> => runCli(args, env, tmp.dir);
  const json = async (...args: string[]): Promise<any> => {
    const r = await cli(...args, '--json');
    expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(0);
    return JSON.parse(r.stdout);
  };
  let org: { id: string };
  let key: { id: string };

  before(async () => {
    await json('migrate');
    org = await json('org', 'create', '--name', 'Acme', '--slug', 'acme');
    key = await json('key', 'issue', org.id, '--label', 'first');
  });
  after(() => tmp.remove());

  /** Exit 2, nothing on stdout, one line on stderr naming `flag`; the same with --json as {"error": error}. */
  async function usage(args: string[], flag: string, error = 'USAGE_ERROR'): Promise<string> {
    const auditBefore = (await json('audit', 'list', '--all')).data.length;
    const r = await cli(...args);
    expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(EXIT_USAGE);
    expect(r.stdout).to.equal('');
    expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1);
    expect(r.stderr).to.include(flag);
    const j = await cli(...args, '--json');
    expect(j.code).to.equal(EXIT_USAGE);
    expect(j.stdout).to.equal('');
    expect(JSON.parse(j.stderr)).to.include({ error });
    expect((await json('audit', 'list', '--all')).data.length, 'nothing changed').to.equal(auditBefore);
    return r.stderr;
  }

  it('every malformed option value exits 2 with the option named (dates, times without an offset, durations, enumerated values and ids: each kind of option)', async () => {
    await usage(['key', 'issue', org.id, '--label', 'x', '--expires-at', 'tomorrow'], "'--expires-at <time>'");
    await usage(['key', 'issue', org.id, '--label', 'x', '--expires-at', '2027-02-30'], '--expires-at');
    await usage(['key', 'issue', org.id, '--label', 'x', '--expires-at', '2027-01-01T10:00:00'], '--expires-at'); // no offset
    await usage(['key', 'issue', org.id, '--label', 'x', '--expires-in', '3x'], '--expires-in');
    await usage(['org', 'classify', org.id, '--section', 'Z'], "'--section <section>'");
    await usage(['key', 'list', org.id, '--unused-for', '1.5d'], '--unused-for');
    await usage(['key', 'list', org.id, '--created-by', 'nope'], '--created-by');
    await usage(['org', 'policy', 'set', org.id, '--max-lifetime', '30m'], '--max-lifetime'); // below 1h
    await usage(['org', 'policy', 'set', org.id, '--environments', 'prod'], '--environments');
    for (const bad of ['0', '1000001', '1.5', '-5', 'fast', '1e3', 'none', '']) await usage(['org', 'limit', 'set', org.id, '--per-minute', bad], "'--per-minute <n>'");
    await usage(['org', 'webhook', 'rotate-secret', org.id, '--overlap', '25h'], '--overlap');
    await usage(['notifications', 'purge', '--older-than', '30'], '--older-than');
    await usage(['notifications', 'list', '--status', 'lost'], '--status');
    await usage(['notifications', 'list', '--org', 'x'], '--org');
    await usage(['audit', 'list', '--kind', 'nope'], '--kind');
    await usage(['audit', 'export', '--format', 'jsonl', '--since', 'yesterday'], '--since');
    await usage(['audit', 'export', '--format', 'jsonl', '--until', '2027-13-01'], '--until');
  });

  it('C-160: every id argument and id option of every command is checked where values are parsed: a malformed one exits 2 naming it and changes nothing', async () => {
    // Values for the required options, so that each command gets as far as the value under test.
    const requiredValues: Record<string, string> = {
      '--label': 'x',
      '--email': 'ada@example.com',
      '--section': 'J',
      '--url': 'https://hooks.example.com/cos',
      '--older-than': '30d',
      '--format': 'jsonl',
      '--key': 'private.pem',
      '--out': 'out.json',
      '--name': 'Globex',
      '--slug': 'globex',
      '--to': 'sqlite:./copy-target.sqlite',
      '--per-minute': '600',
    };
    const tried: string[] = [];
    for (const cmd of commandsOf(buildProgram())) {
      const path = commandPath(cmd);
      const required = cmd.options
        .filter((o) => o.mandatory)
        .flatMap((o) => {
          const value = requiredValues[o.long as string];
          expect(value, `a value for ${path.join(' ')} ${o.long}`).to.be.a('string');
          return [o.long as string, value as string];
        });
      const args = cmd.registeredArguments;
      for (const [i, arg] of args.entries()) {
        const argv = [...path, ...args.map((_, j) => (j === i ? 'not-a-uuid' : org.id)), ...required];
        await usage(argv, `command-argument value 'not-a-uuid' is invalid for argument '${arg.name()}'. Use an id (UUID).`);
        tried.push(`${path.join(' ')} <${arg.name()}>`);
      }
      for (const option of cmd.options.filter((o) => /<[a-z_]*id>$/.test(o.flags))) {
        const argv = [...path, ...args.map(() => org.id), ...required, option.long as string, 'not-a-uuid'];
        await usage(argv, `option '${option.flags}' argument 'not-a-uuid' is invalid. Use an id (UUID).`);
        tried.push(`${path.join(' ')} ${option.long}`);
      }
    }
    // The commands the report named are among them, and every command taking an id was tried.
    expect(tried).to.include.members([
      'key issue <org_id>',
      'key revoke <key_id>',
      'member list <org_id>',
      'key roll <key_id>',
      'notifications retry <id>',
      'member remove <member_id>',
      'audit list --org',
      'key list --created-by',
    ]);
    expect(tried.length).to.be.greaterThan(20);
  });

  it('C-5: --limit outside 1..100 or not a number exits 2 naming --limit, on every list command', async () => {
    for (const list of [['org', 'list'], ['member', 'list', org.id], ['key', 'list', org.id], ['audit', 'list'], ['notifications', 'list']]) {
      for (const bad of ['abc', '0', '101', '1.5']) await usage([...list, '--limit', bad], "'--limit <n>'");
    }
  });

  it('--expires-in 0d is refused with a message that does not offer 0; --grace 8d names --grace, never grace_period_seconds', async () => {
    const zero = await usage(['key', 'issue', org.id, '--label', 'x', '--expires-in', '0d'], '--expires-in');
    expect(zero).to.match(/more than zero/).and.not.to.match(/Use 0 or/);
    const grace = await usage(['key', 'roll', org.id, key.id, '--grace', '8d'], "'--grace <duration>'");
    expect(grace).to.match(/at most 7d/).and.not.to.include('grace_period_seconds');
  });

  it('C-11: a value the core refuses as invalid also exits 2, named by its option (never by the API field)', async () => {
    const r = await usage(['key', 'issue', org.id, '--label', 'x', '--expires-at', '2020-01-01'], 'invalid input: --expires-at:', 'VALIDATION_ERROR');
    expect(r).not.to.include('expires_at');
    await usage(['org', 'create', '--name', ' ', '--slug', 'fine'], 'invalid input: --name:', 'VALIDATION_ERROR');
  });

  it('C-23: --expires-at takes a date (that day 00:00 UTC) or an RFC 3339 time; --expires-in takes combinations such as 1h30m', async () => {
    expect((await json('key', 'issue', org.id, '--label', 'dated', '--expires-at', '2099-01-01')).expires_at).to.equal('2099-01-01T00:00:00.000Z');
    expect((await json('key', 'issue', org.id, '--label', 'offset', '--expires-at', '2099-01-01T10:30:00+01:00')).expires_at).to.equal(
      '2099-01-01T09:30:00.000Z',
    );
    const k = await json('key', 'issue', org.id, '--label', 'combined', '--expires-in', '1h30m');
    expect(Date.parse(k.expires_at) - Date.parse(k.created_at)).to.be.within(90 * 60_000 - 5_000, 90 * 60_000);
    const w = await json('key', 'issue', org.id, '--label', 'weeks', '--expires-in', '2w');
    expect(Date.parse(w.expires_at) - Date.parse(w.created_at)).to.be.within(14 * 86_400_000 - 5_000, 14 * 86_400_000);
  });

  it('C-62: --max-lifetime takes the duration grammar (2w, 1h30m) or none', async () => {
    expect(await json('org', 'policy', 'set', org.id, '--max-lifetime', '2w')).to.include({ max_lifetime_seconds: 14 * 86_400 });
    expect(await json('org', 'policy', 'set', org.id, '--max-lifetime', '1h30m')).to.include({ max_lifetime_seconds: 5_400 });
    expect(await json('org', 'policy', 'set', org.id, '--max-lifetime', 'none')).to.include({ max_lifetime_seconds: null });
  });

  it('C-34: "not found" names what is missing: an unknown organisation, not the key or member in it', async () => {
    const unknownOrg = randomUUID();
    for (const args of [
      ['key', 'revoke', unknownOrg, key.id],
      ['key', 'roll', unknownOrg, key.id],
      ['member', 'remove', unknownOrg, randomUUID()],
      ['org', 'webhook', 'remove', unknownOrg],
    ]) {
      const r = await cli(...args);
      expect(r.code, args.join(' ')).to.equal(1);
      expect(r.stderr, args.join(' ')).to.equal('cos-admin: Organisation not found\n');
    }
    expect((await cli('key', 'revoke', org.id, randomUUID())).stderr).to.equal('cos-admin: API key not found\n');
    expect((await cli('member', 'remove', org.id, randomUUID())).stderr).to.equal('cos-admin: Member not found\n');
  });

  it('C-35, C-58: removals are idempotent like revocation: the second exits 0, says nothing changed (--json: "changed": false), audits nothing', async () => {
    const member = await json('member', 'add', org.id, '--email', 'ada@example.com');
    expect(await json('member', 'remove', org.id, member.id)).to.deep.equal({ id: member.id, organisation_id: org.id, removed: true, changed: true });
    const again = await cli('member', 'remove', org.id, member.id);
    expect(again.code, again.stderr).to.equal(0);
    expect(again.stdout).to.equal(`Member ${member.id} was already removed from organisation ${org.id}; nothing changed.\n`);
    expect(await json('member', 'remove', org.id, member.id)).to.deep.equal({ id: member.id, organisation_id: org.id, removed: true, changed: false });
    expect((await json('audit', 'list', '--org', org.id, '--kind', 'member_removed', '--all')).data).to.have.length(1);

    const doomed = await json('key', 'issue', org.id, '--label', 'doomed');
    expect(await json('key', 'revoke', org.id, doomed.id)).to.include({ status: 'revoked', changed: true });
    const revokedAgain = await cli('key', 'revoke', org.id, doomed.id);
    expect(revokedAgain.code).to.equal(0);
    expect(revokedAgain.stdout).to.match(new RegExp(`^API key ${doomed.id} was already revoked; nothing changed:\n`));
    expect(await json('key', 'revoke', org.id, doomed.id)).to.include({ status: 'revoked', changed: false });
    expect((await json('audit', 'list', '--org', org.id, '--kind', 'api_key_revoked', '--all')).data).to.have.length(1);

    const none = await cli('org', 'webhook', 'remove', org.id);
    expect(none.code, none.stderr).to.equal(0);
    expect(none.stdout).to.equal(`Organisation ${org.id} has no webhook endpoint; nothing changed.\n`);
    expect(await json('org', 'webhook', 'remove', org.id)).to.deep.equal({ organisation_id: org.id, removed: true, changed: false });
    expect((await json('audit', 'list', '--org', org.id, '--kind', 'webhook_endpoint_removed', '--all')).data).to.have.length(0);
  });

  it('C-6: every list command takes --all (each page followed to the last; --all with --cursor is refused)', async () => {
    const lists = [['org', 'list'], ['member', 'list', org.id], ['key', 'list', org.id], ['audit', 'list'], ['notifications', 'list']];
    for (const list of lists) {
      const all = await json(...list, '--all', '--limit', '1');
      expect(all.meta.next_cursor, list.join(' ')).to.equal(null);
      const r = await cli(...list, '--all', '--cursor', 'x');
      expect(r.code, list.join(' ')).to.equal(EXIT_USAGE);
    }
    const keys = await json('key', 'list', org.id, '--all', '--limit', '1');
    expect(keys.data.length).to.be.greaterThan(1);
  });
});

/** Every command of the tree below `cmd`, `cmd` first. */
function* commandsOf(cmd: Command): Generator<Command> {
  yield cmd;
  for (const sub of cmd.commands) yield* commandsOf(sub);
}

/** A command's words on the command line (`['org', 'webhook', 'set']`). */
function commandPath(cmd: Command): string[] {
  const words: string[] = [];
  for (let c: Command | null = cmd; c?.parent != null; c = c.parent) words.unshift(c.name());
  return words;
}

describe('cos-admin help: every command shows the global options', () => {
  const commands = commandsOf;

  it('every subcommand lists --json and --actor under "Global Options" (and --json once)', () => {
    const program = buildProgram();
    const all = [...commands(program)].slice(1);
    expect(all.length).to.be.greaterThan(25);
    for (const cmd of all) {
      const help = cmd.helpInformation();
      const name = cmd.name();
      expect(help, name).to.include('Global Options:');
      expect(help, name).to.match(/--actor <name>/);
      expect(help.match(/^ {2}--json /gm), name).to.have.length(1);
    }
  });

  it('the program help states the duration and timestamp grammars', async () => {
    const r = await runCli(['--help'], {}, process.cwd());
    expect(r.code).to.equal(0);
    expect(r.stdout).to.include('whole\nnumbers with units w, d, h, m, s, largest first, each once: 30s, 15m, 12h, 7d, 2w, 1h30m');
    expect(r.stdout).to.include('a date, 2027-01-01 = that day 00:00 UTC, or an RFC 3339');
  });
});
