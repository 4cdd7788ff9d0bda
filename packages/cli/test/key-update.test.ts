/**
 * `cos-admin key update` (C-260..C-262) in-process on a fresh SQLite file: label, metadata set and
 * unset, allowed networks and `any`; scopes and expiry are not among its options; bad values exit 2
 * named by the option and change nothing. And TRUSTED_PROXIES (C-266): CIDRs, normalised, only with
 * TRUST_PROXY.
 */
import { join } from 'node:path';
import { expect } from 'chai';
import { EXIT_USAGE } from '../src/errors.js';
import { loadConfig } from '../src/config.js';
import { runCli, tempDir, type CliResult } from './support/cli.js';

describe('cos-admin key update (in-process, SQLite)', function () {
  const tmp = tempDir('cos-cli-key-update-');
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
    key = await json('key', 'issue', org.id, '--label', 'ci');
  });
  after(() => tmp.remove());

  const updates = async (): Promise<number> => (await json('audit', 'list', '--kind', 'api_key_updated', '--all')).data.length;

  it('C-261: --label, repeated --metadata and --unset-metadata, --allowed-cidrs: the record as changed, audited with the field names', async () => {
    const first = await json('key', 'update', org.id, key.id, '--label', 'ci runner', '--metadata', 'owner=team-a', '--metadata', 'url=https://x.example/?a=b', '--allowed-cidrs', '10.0.0.0/8, 2001:DB8::/32');
    expect(first).to.include({ id: key.id, label: 'ci runner' });
    expect(first.metadata).to.deep.equal({ owner: 'team-a', url: 'https://x.example/?a=b' });
    expect(first.allowed_cidrs).to.deep.equal(['10.0.0.0/8', '2001:db8::/32']);
    const second = await json('key', 'update', org.id, key.id, '--unset-metadata', 'url', '--allowed-cidrs', 'any');
    expect(second.metadata).to.deep.equal({ owner: 'team-a' });
    expect(second.allowed_cidrs).to.equal(null);
    const text = await cli('key', 'update', org.id, key.id, '--metadata', 'team=payments');
    expect(text.code, text.stderr).to.equal(0);
    expect(text.stdout).to.match(/^Updated API key:/).and.to.match(/metadata team:\s+payments/).and.to.match(/allowed from:\s+any address/);
    const entries = (await json('audit', 'list', '--kind', 'api_key_updated', '--all')).data;
    expect(entries.map((e: { changed_fields: string[] }) => e.changed_fields)).to.deep.equal([['allowed_cidrs', 'label', 'metadata'], ['allowed_cidrs', 'metadata'], ['metadata']]);
    expect(JSON.stringify(entries)).to.not.include('team-a').and.not.include('payments');
  });

  /** Exit 2 with one line naming `flag`, nothing written. */
  async function usage(args: string[], flag: string): Promise<void> {
    const before = await updates();
    const r = await cli(...args);
    expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(EXIT_USAGE);
    expect(r.stdout).to.equal('');
    expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1);
    expect(r.stderr).to.include(flag);
    expect(await updates(), 'nothing changed').to.equal(before);
  }

  it('bad values exit 2 naming the option; so does an update with nothing to change; scopes and expiry are not options', async () => {
    await usage(['key', 'update', org.id, key.id, '--metadata', 'novalue'], '--metadata novalue');
    await usage(['key', 'update', org.id, key.id, '--metadata', 'bad name=x'], '--metadata bad name');
    await usage(['key', 'update', org.id, key.id, '--metadata', `long=${'v'.repeat(501)}`], '--metadata long');
    await usage(['key', 'update', org.id, key.id, '--allowed-cidrs', '10.0.0.1/8'], '--allowed-cidrs 10.0.0.1/8');
    await usage(['key', 'update', org.id, key.id, '--allowed-cidrs', '10.0.0.0/8,nonsense'], '--allowed-cidrs nonsense');
    await usage(['key', 'update', org.id, key.id, '--label', ''], '--label');
    await usage(['key', 'update', org.id, key.id], 'nothing to change');
    await usage(['key', 'update', org.id, key.id, '--scopes', 'audit:read'], '--scopes');
    await usage(['key', 'update', org.id, 'nope', '--label', 'x'], "argument 'key_id'");
  });

  it('C-260, C-262: key issue takes --metadata and --allowed-cidrs too; a bad value exits 2 naming it, with nothing issued', async () => {
    const issued = await json('key', 'issue', org.id, '--label', 'office', '--metadata', 'owner=ops', '--allowed-cidrs', '198.51.100.0/24');
    expect(issued.metadata).to.deep.equal({ owner: 'ops' });
    expect(issued.allowed_cidrs).to.deep.equal(['198.51.100.0/24']);
    const keys = async (): Promise<number> => (await json('key', 'list', org.id, '--all')).data.length;
    const before = await keys();
    await usage(['key', 'issue', org.id, '--label', 'x', '--allowed-cidrs', '198.51.100.1/24'], '--allowed-cidrs 198.51.100.1/24');
    await usage(['key', 'issue', org.id, '--label', 'x', '--metadata', 'owner'], '--metadata owner');
    expect(await keys()).to.equal(before);
  });

  it("C-290, C-291: --rate-limit on issue and update ('none' removes it), audited; above the organisation's limit exits 2 naming the option; a bad value exits 2", async () => {
    const issued = await json('key', 'issue', org.id, '--label', 'limited', '--rate-limit', '30');
    expect(issued.rate_limit_per_minute).to.equal(30);
    expect((await json('key', 'update', org.id, issued.id, '--rate-limit', '10')).rate_limit_per_minute).to.equal(10);
    const text = await cli('key', 'update', org.id, issued.id, '--rate-limit', 'none');
    expect(text.code, text.stderr).to.equal(0);
    expect(text.stdout).to.match(/rate limit:\s+the organisation's/);
    const entries = (await json('audit', 'list', '--kind', 'api_key_updated', '--all')).data.filter((e: { key_id: string }) => e.key_id === issued.id);
    expect(entries.map((e: { rate_limit: unknown }) => e.rate_limit)).to.deep.equal([{ old: 30, new: 10 }, { old: 10, new: null }]);
    await usage(['key', 'update', org.id, issued.id, '--rate-limit', '61'], '--rate-limit');
    await usage(['key', 'update', org.id, issued.id, '--rate-limit', '0'], '--rate-limit');
    await usage(['key', 'update', org.id, issued.id, '--rate-limit', 'default'], '--rate-limit');
  });

  it('C-261: a revoked key is refused (exit 1, CONFLICT) and stays as it was', async () => {
    const gone = await json('key', 'issue', org.id, '--label', 'gone');
    await json('key', 'revoke', org.id, gone.id);
    const r = await cli('key', 'update', org.id, gone.id, '--label', 'x', '--json');
    expect(r.code).to.equal(1);
    expect(JSON.parse(r.stderr)).to.include({ error: 'CONFLICT' });
  });
});

describe('TRUSTED_PROXIES (C-266)', () => {
  const load = (env: Record<string, string>) => loadConfig(env, { envFile: false });

  it('C-266: unset by default; comma-separated CIDRs, normalised; only with TRUST_PROXY=true; a bad entry names the variable', () => {
    expect(load({}).trustedProxies).to.equal(null);
    expect(load({ TRUST_PROXY: 'true', TRUSTED_PROXIES: '10.0.0.0/8, 192.0.2.10,FD00::/8' }).trustedProxies).to.deep.equal(['10.0.0.0/8', '192.0.2.10/32', 'fd00::/8']);
    expect(() => load({ TRUSTED_PROXIES: '10.0.0.0/8' })).to.throw(/TRUSTED_PROXIES is set but TRUST_PROXY is not true/);
    expect(() => load({ TRUST_PROXY: 'true', TRUSTED_PROXIES: '10.0.0.0/8,10.0.0.1/8' })).to.throw(/^invalid configuration: TRUSTED_PROXIES: 10\.0\.0\.1\/8 has host bits set: the network is 10\.0\.0\.0\/8$/);
    expect(() => load({ TRUST_PROXY: 'true', TRUSTED_PROXIES: 'proxy.internal' })).to.throw(/TRUSTED_PROXIES: proxy\.internal must be an IPv4 or IPv6 network/);
  });
});
