/**
 * Webhook destinations through `cos-admin` (C-59, SSRF), as child processes on a temp SQLite file:
 * `org webhook set` refuses internal endpoints (exit 2, a refused command-line value: one line
 * naming `--url` and why, nothing stored), WEBHOOK_ALLOW_HTTP / WEBHOOK_ALLOW_PRIVATE opt in, and `serve` checks again at delivery
 * on the address it connects to, so an endpoint set under other rules is not delivered to.
 */
import { expect } from 'chai';
import { describeWebhookHostResolver } from '@cos/core/testing/contracts';
import { systemWebhookHosts } from '../src/compose.js';
import { cliJson, ensureBuilt, runCli, startServe, type Env, type ServeProcess } from './support/cli.js';
import { databaseTargets, type TestDatabase } from './support/databases.js';
import { startReceiver, type Receiver } from './support/scanner.js';

const PRIVATE_HINT = '; WEBHOOK_ALLOW_PRIVATE=true (development and tests only) allows it';
const LOCAL: Env = { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE: 'true' };

describeWebhookHostResolver('cos-admin systemWebhookHosts (the resolver org webhook set uses)', () => systemWebhookHosts);

describe('cos-admin: webhook destinations (C-59, SSRF)', function () {
  this.timeout(90_000);
  const sqlite = databaseTargets().find((t) => t.name === 'SQLite')!;
  let db: TestDatabase;
  let env: Env;
  let orgId: string;
  const servers: ServeProcess[] = [];
  const receivers: Receiver[] = [];

  before(async function () {
    this.timeout(180_000);
    await ensureBuilt();
    db = await sqlite.create();
    env = { DATABASE_URL: db.databaseUrl, PORT: '0', WEBHOOK_POLL_INTERVAL_MS: '50', WEBHOOK_RETRY_BASE_MS: '60000', WEBHOOK_TIMEOUT_MS: '2000' };
    await cliJson(['migrate'], env, db.cwd);
    orgId = (await cliJson<{ id: string }>(['org', 'create', '--name', 'Acme', '--slug', 'acme'], env, db.cwd)).id;
  });
  afterEach(async () => {
    for (const s of servers.splice(0)) s.kill();
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  after(async () => {
    await db?.drop();
  });

  /** Runs `org webhook set` and expects exit 2 (an option value refused) with one line `invalid input: --url: <issue>` and nothing stored. */
  async function expectRefused(url: string, issue: string, extra: Env = {}): Promise<void> {
    const r = await runCli(['org', 'webhook', 'set', orgId, '--url', url, '--json'], { ...env, ...extra }, db.cwd);
    expect(r.code, `${url}: ${r.stderr}`).to.equal(2);
    expect(r.stdout).to.equal('');
    expect(JSON.parse(r.stderr)).to.deep.equal({ error: 'VALIDATION_ERROR', message: `invalid input: --url: ${issue}` });
  }

  it('C-59 (SSRF): org webhook set refuses internal endpoints (each kind of form of the issue, and the service\'s own API) with exit 2 and a line naming --url and why; nothing is stored', async () => {
    // Every form of the issue is checked in-process by the core's tests; here one of each kind goes
    // through the command: a name, a numeric spelling, an IPv4-mapped address,
    // one never allowed, cloud metadata by address and by name, a private address.
    const refused: Array<[string, string]> = [
      ['https://localhost/hook', `host localhost is an internal name${PRIVATE_HINT}`],
      ['https://2130706433/hook', `address 127.0.0.1 is not allowed (loopback)${PRIVATE_HINT}`],
      ['https://[::ffff:127.0.0.1]/hook', `address ::ffff:7f00:1 is not allowed (loopback: IPv4-mapped 127.0.0.1)${PRIVATE_HINT}`],
      ['https://0.0.0.0/hook', 'address 0.0.0.0 is not allowed (unspecified)'],
      ['https://169.254.169.254/latest/meta-data/', `address 169.254.169.254 is not allowed (link-local)${PRIVATE_HINT}`],
      ['https://metadata.google.internal/computeMetadata/v1/', `host metadata.google.internal is an internal name${PRIVATE_HINT}`],
      ['https://10.0.0.1/hook', `address 10.0.0.1 is not allowed (private)${PRIVATE_HINT}`],
    ];
    for (let i = 0; i < refused.length; i += 4) await Promise.all(refused.slice(i, i + 4).map(([url, issue]) => expectRefused(url, issue)));
    // The service's own API (HOST and PORT defaults): http:// is refused, and with WEBHOOK_ALLOW_HTTP its address.
    const own = 'http://127.0.0.1:3000/v1/organisations';
    await expectRefused(own, 'http:// is not allowed, only https://; WEBHOOK_ALLOW_HTTP=true allows it');
    await expectRefused(own, `address 127.0.0.1 is not allowed (loopback)${PRIVATE_HINT}`, { WEBHOOK_ALLOW_HTTP: 'true' });
    const show = await runCli(['org', 'webhook', 'show', orgId], env, db.cwd);
    expect(show.code).to.equal(1);
    expect(show.stderr).to.equal('cos-admin: The organisation has no webhook endpoint\n');
  });

  it('C-59 (SSRF): an endpoint on loopback is accepted with both opt-ins; serve checks again at delivery: one without WEBHOOK_ALLOW_PRIVATE sends nothing (last_error says why), one with it delivers', async () => {
    const receiver = await startReceiver(() => secret);
    receivers.push(receiver);
    const set = await cliJson<{ secret: string }>(['org', 'webhook', 'set', orgId, '--url', receiver.url], { ...env, ...LOCAL }, db.cwd);
    const secret = set.secret;
    await cliJson(['key', 'issue', orgId, '--label', 'ssrf'], env, db.cwd);

    const strict = startServe([], { ...env, WEBHOOK_ALLOW_HTTP: 'true' }, db.cwd);
    servers.push(strict);
    await strict.listening();
    type Row = { id: string; attempts: number; status: string; last_error: string | null };
    let rows: Row[] = [];
    for (let i = 0; i < 200; i++) {
      rows = (await cliJson<{ data: Row[] }>(['notifications', 'list', '--org', orgId], env, db.cwd)).data;
      // The attempt is counted when claimed; wait for its outcome (last_error) too.
      if (rows[0] !== undefined && rows[0].attempts >= 1 && rows[0].last_error !== null) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(rows).to.have.length(1);
    expect(rows[0]).to.include({ status: 'pending', attempts: 1, last_error: 'address 127.0.0.1 is not allowed (loopback)' });
    expect(receiver.received, 'nothing reached the receiver').to.equal(0);
    strict.kill();
    await strict.exited();

    await cliJson(['notifications', 'retry', rows[0]!.id], env, db.cwd);
    const local = startServe([], { ...env, ...LOCAL }, db.cwd);
    servers.push(local);
    await local.listening();
    await receiver.waitFor((d) => d.length >= 1);
    expect(receiver.delivered.map((d) => [d.type, d.verified])).to.deep.equal([['api_key.issued', true]]);
  });
});
