/**
 * `cos-admin db copy --to URL` (C-31, C-36, C-59, C-63, C-190): a deployment's database moved to
 * another, SQLite to Postgres, Postgres to SQLite and SQLite to SQLite, with data made through the
 * API and the CLI (scoped keys, lineage, a revocation, a roll in its grace period, a key policy, a plan,
 * sealed webhook secrets, pending notifications, an idempotency record, an audit checkpoint); then
 * `serve` on the target answers every key as the source did, replays the kept answer, and the
 * checkpoint signed on the source verifies on the target. A copy killed halfway leaves the target
 * empty, and bad targets change nothing.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSqlStore, MIGRATIONS_TABLE, type SqlStore } from '@cos/store-sql';
import { childEnv, cliJson, ensureBuilt, nodeArgs, printedKeys, runCli, startServe, type Env, type ServeProcess } from './support/cli.js';
import { databaseTargets, type DatabaseTarget, type TestDatabase } from './support/databases.js';

const ENCRYPTION_KEY = randomBytes(32).toString('hex');

function envOf(db: TestDatabase): Env {
  return {
    DATABASE_URL: db.databaseUrl,
    PORT: '0',
    WEBHOOK_SECRET_ENCRYPTION_KEY: ENCRYPTION_KEY,
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_POLL_INTERVAL_MS: '3600000',
  };
}

async function status(url: string, path: string, key: string): Promise<number> {
  return (await fetch(`${url}/v1${path}`, { headers: { authorization: `Bearer ${key}` } })).status;
}

async function rows(store: SqlStore, sql: string): Promise<Array<Record<string, unknown>>> {
  return store.query(sql);
}

/** What the source holds, and what the target must answer alike. */
interface Made {
  readonly orgId: string;
  readonly platformKey: string;
  /** Keys that must authenticate on the target. */
  readonly valid: readonly string[];
  /** Keys that must be refused on the target. */
  readonly refused: readonly string[];
  /** The scoped key issued through the API, with an Idempotency-Key. */
  readonly issuer: string;
  readonly idempotencyKey: string;
  readonly issuedId: string;
  readonly checkpoint: string;
  readonly publicKey: string;
}

async function populate(db: TestDatabase, env: Env): Promise<Made> {
  await cliJson(['migrate'], env, db.cwd);
  const boot = await runCli(['bootstrap'], env, db.cwd);
  expect(boot.code, boot.stderr).to.equal(0);
  const [platformKey] = printedKeys(boot.stdout);
  const org = await cliJson<{ id: string }>(['org', 'create', '--name', 'Moving Ltd', '--slug', 'moving'], env, db.cwd);
  await cliJson(['org', 'policy', 'set', org.id, '--max-lifetime', '30d', '--exposure-response', 'revoke_key_and_descendants'], env, db.cwd);
  await cliJson(['org', 'limit', 'set', org.id, '--per-minute', '250'], env, db.cwd);
  await cliJson(['member', 'add', org.id, '--email', 'owner@moving.example'], env, db.cwd);
  await cliJson(['org', 'webhook', 'set', org.id, '--url', 'http://127.0.0.1:9/hooks'], env, db.cwd);
  const issuer = await cliJson<{ id: string; key: string }>(['key', 'issue', org.id, '--label', 'issuer'], env, db.cwd);
  // Metadata and networks are copied with the key (restricted to where the test's requests come from).
  await cliJson(['key', 'update', org.id, issuer.id, '--metadata', 'owner=team-moving', '--allowed-cidrs', '127.0.0.0/8,::1/128'], env, db.cwd);
  const gone = await cliJson<{ id: string; key: string }>(['key', 'issue', org.id, '--label', 'gone'], env, db.cwd);
  await cliJson(['key', 'revoke', org.id, gone.id], env, db.cwd);
  const old = await cliJson<{ id: string; key: string }>(['key', 'issue', org.id, '--label', 'rolled'], env, db.cwd);
  const rolled = await cliJson<{ id: string; key: string }>(['key', 'roll', org.id, old.id, '--grace', '1h'], env, db.cwd);

  const server = startServe([], env, db.cwd);
  try {
    const { url } = await server.listening();
    const res = await fetch(`${url}/v1/organisations/${org.id}/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${issuer.key}`, 'content-type': 'application/json', 'idempotency-key': 'move-1' },
      body: JSON.stringify({ label: 'reader', scopes: ['organisations:read'] }),
    });
    expect(res.status).to.equal(201);
    const reader = (await res.json()) as { id: string; key: string; created_by_key_id: string };
    expect(reader.created_by_key_id).to.equal(issuer.id);
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    writeFileSync(join(db.cwd, 'private.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
    writeFileSync(join(db.cwd, 'public.pem'), publicKey.export({ type: 'spki', format: 'pem' }));
    const checkpoint = join(db.cwd, 'checkpoint.json');
    const signed = await runCli(['audit', 'checkpoint', '--key', join(db.cwd, 'private.pem'), '--out', checkpoint], env, db.cwd);
    expect(signed.code, signed.stderr).to.equal(0);
    return {
      orgId: org.id,
      platformKey: platformKey!,
      valid: [platformKey!, issuer.key, old.key, rolled.key!, reader.key],
      refused: [gone.key],
      issuer: issuer.key,
      idempotencyKey: 'move-1',
      issuedId: reader.id,
      checkpoint,
      publicKey: join(db.cwd, 'public.pem'),
    };
  } finally {
    server.kill();
    await server.exited();
  }
}

const targets = databaseTargets();
const sqlite = targets.find((t) => t.name === 'SQLite')!;
const postgres = targets.find((t) => t.name === 'Postgres');
const directions: Array<[DatabaseTarget, DatabaseTarget]> = [[sqlite, sqlite], ...(postgres !== undefined ? ([[sqlite, postgres], [postgres, sqlite]] as Array<[DatabaseTarget, DatabaseTarget]>) : [])];

describe('cos-admin db copy (C-190)', function () {
  this.timeout(180_000);
  const dbs: TestDatabase[] = [];
  const servers: ServeProcess[] = [];

  before(ensureBuilt);

  afterEach(async () => {
    for (const s of servers.splice(0)) s.kill();
    await Promise.all(servers.map((s) => s.exited()));
    for (const db of dbs.splice(0)) await db.drop();
  });

  async function database(target: DatabaseTarget): Promise<TestDatabase> {
    const db = await target.create();
    dbs.push(db);
    return db;
  }

  for (const [from, to] of directions) {
    it(`C-190, C-31, C-36, C-63: ${from.name} to ${to.name}: every key answers as before, the revoked one stays refused, the kept answer replays and the source's signed checkpoint verifies`, async () => {
      const source = await database(from);
      const target = await database(to);
      const env = envOf(source);
      const made = await populate(source, env);

      const copied = await runCli(['db', 'copy', '--to', target.databaseUrl], env, source.cwd);
      expect(copied.code, copied.stderr).to.equal(0);
      expect(copied.stdout).to.match(/^Copied \d+ rows from the /);
      expect(copied.stdout).to.include('Verified: row counts equal');
      expect(copied.stderr).to.match(/api_keys: 6 of 6 rows/);

      const targetEnv = envOf(target);
      const server = startServe([], targetEnv, target.cwd);
      servers.push(server);
      const { url } = await server.listening();
      for (const key of made.valid) expect(await status(url, `/organisations/${made.orgId}`, key), key.slice(0, 12)).to.equal(200);
      for (const key of made.refused) expect(await status(url, `/organisations/${made.orgId}`, key)).to.equal(401);

      const replay = await fetch(`${url}/v1/organisations/${made.orgId}/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${made.issuer}`, 'content-type': 'application/json', 'idempotency-key': made.idempotencyKey },
        body: JSON.stringify({ label: 'reader', scopes: ['organisations:read'] }),
      });
      expect(replay.status).to.equal(201);
      expect(replay.headers.get('idempotent-replayed')).to.equal('true');
      expect(((await replay.json()) as { id: string }).id).to.equal(made.issuedId);

      const verified = await runCli(['audit', 'verify', '--checkpoint', made.checkpoint, '--public-key', made.publicKey], targetEnv, target.cwd);
      expect(verified.code, verified.stdout + verified.stderr).to.equal(0);
      expect(verified.stdout).to.match(/extend the checkpoint of/);

      // Sealed secrets byte for byte; the target decrypts them with the same key; the outbox and the lineage as they were.
      const a = createSqlStore({ databaseUrl: source.databaseUrl });
      const b = createSqlStore({ databaseUrl: target.databaseUrl });
      try {
        const secrets = 'SELECT organisation_id, secret FROM webhook_endpoints ORDER BY organisation_id';
        const [sa, sb] = [await rows(a, secrets), await rows(b, secrets)];
        expect(sa).to.have.length(1);
        expect(String(sa[0]!['secret'])).not.to.match(/^whsec_/);
        expect(sb).to.deep.equal(sa);
        const outbox = 'SELECT id, event_type, payload, status, seq FROM webhook_outbox ORDER BY seq';
        const [oa, ob] = [await rows(a, outbox), await rows(b, outbox)];
        expect(oa.length).to.be.greaterThan(0);
        expect(ob.map((r) => ({ ...r, seq: Number(r['seq']) }))).to.deep.equal(oa.map((r) => ({ ...r, seq: Number(r['seq']) })));
      } finally {
        await a.close();
        await b.close();
      }
      type Listed = { data: Array<{ id: string; label: string; metadata: Record<string, string>; allowed_cidrs: string[] | null }> };
      // Metadata and networks as on the source (last_used_at moves on: the target has served requests).
      const listedOn = async (e: typeof env, cwd: string) =>
        (await cliJson<Listed>(['key', 'list', made.orgId, '--all'], e, cwd)).data.map(({ id, label, metadata, allowed_cidrs }) => ({ id, label, metadata, allowed_cidrs }));
      const [keysBefore, keysAfter] = [await listedOn(env, source.cwd), await listedOn(targetEnv, target.cwd)];
      expect(keysAfter).to.deep.equal(keysBefore);
      expect(keysAfter.find((k) => k.label === 'issuer')).to.deep.include({ metadata: { owner: 'team-moving' }, allowed_cidrs: ['127.0.0.0/8', '::1/128'] });
      const shown = await cliJson<{ url: string }>(['org', 'webhook', 'show', made.orgId], targetEnv, target.cwd);
      expect(shown.url).to.equal('http://127.0.0.1:9/hooks');
      expect(await cliJson(['org', 'limit', 'show', made.orgId], targetEnv, target.cwd), 'the plan came along').to.deep.equal({ requests_per_minute: 250, source: 'organisation' });
      // A notification enqueued on the target takes the next write-order number.
      const keys = await cliJson<{ data: Array<{ id: string; label: string }> }>(['key', 'list', made.orgId, '--all'], targetEnv, target.cwd);
      await cliJson(['key', 'revoke', made.orgId, keys.data.find((k) => k.label === 'reader')!.id], targetEnv, target.cwd);
      const after = await cliJson<{ data: unknown[] }>(['notifications', 'list', '--org', made.orgId, '--limit', '100'], targetEnv, target.cwd);
      expect(after.data.length).to.be.greaterThan(1);
    });
  }

  it('C-190: refused targets change nothing: a non-empty one and a source behind this version exit 1; an unsupported URL or the source itself exit 2', async () => {
    const source = await database(sqlite);
    const env = envOf(source);
    await cliJson(['migrate'], env, source.cwd);
    await cliJson(['org', 'create', '--name', 'Source', '--slug', 'source'], env, source.cwd);

    const busy = await database(postgres ?? sqlite);
    const busyEnv = envOf(busy);
    await cliJson(['migrate'], busyEnv, busy.cwd);
    await cliJson(['org', 'create', '--name', 'Already here', '--slug', 'here'], busyEnv, busy.cwd);
    const refused = await runCli(['db', 'copy', '--to', busy.databaseUrl], env, source.cwd);
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.equal('cos-admin: the target database is not empty: organisations holds 1 row; nothing was written\n');
    const orgs = await cliJson<{ data: Array<{ slug: string }> }>(['org', 'list'], busyEnv, busy.cwd);
    expect(orgs.data.map((o) => o.slug)).to.deep.equal(['here']);

    const same = await runCli(['db', 'copy', '--to', source.databaseUrl], env, source.cwd);
    expect(same.code).to.equal(2);
    expect(same.stderr).to.include('--to names the source database itself');
    const unsupported = await runCli(['db', 'copy', '--to', 'mysql://root@127.0.0.1/x'], env, source.cwd);
    expect(unsupported.code).to.equal(2);
    expect(unsupported.stderr).to.include('--to: the URL scheme "mysql:" is not supported');
    const nothing = await runCli(['db', 'copy'], env, source.cwd);
    expect(nothing.code).to.equal(2);

    const unreachable = await runCli(['db', 'copy', '--to', 'postgres://postgres@127.0.0.1:1/nowhere'], env, source.cwd);
    expect(unreachable.code).to.equal(1);
    expect(unreachable.stderr).to.match(/^cos-admin: cannot reach the target database postgres:\/\/postgres@127\.0\.0\.1:1\/nowhere/);

    // A source a migration behind: refused before the target is touched.
    const store = createSqlStore({ databaseUrl: source.databaseUrl });
    try {
      await store.query(`DELETE FROM ${MIGRATIONS_TABLE} WHERE id = (SELECT max(id) FROM ${MIGRATIONS_TABLE})`);
    } finally {
      await store.close();
    }
    const fresh = await database(sqlite);
    const behind = await runCli(['db', 'copy', '--to', fresh.databaseUrl], env, source.cwd);
    expect(behind.code).to.equal(1);
    expect(behind.stderr).to.match(/source database is behind this version \(1 pending migration\): run `cos-admin migrate` on it first; nothing was written/);
    const check = createSqlStore({ databaseUrl: fresh.databaseUrl });
    try {
      expect(await check.pendingMigrations()).to.have.length.greaterThan(10);
    } finally {
      await check.close();
    }
  });

  it('C-190: a copy killed halfway leaves the target without a row, and the copy then succeeds', async () => {
    const source = await database(sqlite);
    const target = await database(postgres ?? sqlite);
    const env = envOf(source);
    await cliJson(['migrate'], env, source.cwd);
    const org = await cliJson<{ id: string }>(['org', 'create', '--name', 'Big', '--slug', 'big'], env, source.cwd);
    // Enough key rows that the copy is still inside api_keys when it is killed.
    const store = createSqlStore({ databaseUrl: source.databaseUrl, statementTimeoutMs: 60_000 });
    const count = 40_000;
    try {
      for (let i = 0; i < count; i += 2000) {
        const batch = Array.from({ length: Math.min(2000, count - i) }, (_, j) => ({
          id: randomUUID(),
          organisation_id: org.id,
          label: `k${i + j}`,
          key_prefix: 'svc_live_abc',
          digest: randomBytes(32).toString('hex'),
          created_at: Date.now(),
        }));
        await store.knex.batchInsert('api_keys', batch, 500);
      }
    } finally {
      await store.close();
    }

    const child = spawn(process.execPath, nodeArgs(['db', 'copy', '--to', target.databaseUrl]), { cwd: source.cwd, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    const killed = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      // organisations and members are done, api_keys (40,000 rows, 80 batches) has begun.
      if (/^members: /m.test(stderr)) child.kill('SIGKILL');
    });
    expect(await killed).to.equal('SIGKILL');
    expect(stderr).not.to.match(/^api_keys: /m);

    const check = createSqlStore({ databaseUrl: target.databaseUrl });
    try {
      for (const table of ['organisations', 'members', 'api_keys', 'audit_entries']) {
        const [row] = await check.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${table}`);
        expect(Number(row!.n), table).to.equal(0);
      }
    } finally {
      await check.close();
    }
    const again = await runCli(['db', 'copy', '--to', target.databaseUrl, '--verify', 'all', '--json'], env, source.cwd);
    expect(again.code, again.stderr).to.equal(0);
    const summary = JSON.parse(again.stdout) as { tables: Array<{ table: string; rows: number }>; verification: { keys_compared: string } };
    expect(summary.tables.find((t) => t.table === 'api_keys')!.rows).to.equal(count);
    expect(summary.verification.keys_compared).to.equal('all');
  });
});
