#!/usr/bin/env node
/**
 * `node scripts/upgrade-check.mjs REF POSTGRES_URL`: the rolling-upgrade check. Two adjacent
 * versions run side by side during a rollout: the previous release (REF) keeps serving while this
 * checkout (HEAD) has migrated the schema. So this script
 *   1. extracts REF's tree (`git archive`) into a temporary directory, installs it from the lockfile
 *      (pnpm's store; nothing compiles when the workspace's install built the same native addon)
 *      and builds it;
 *   2. migrates the database at POSTGRES_URL (which must be empty) with HEAD's `cos-admin migrate`;
 *   3. starts REF's `serve --bootstrap` on it and, through its API, creates an organisation, issues
 *      a key, authenticates with it, revokes it (401 at once) and runs into the rate limit (429);
 *   4. runs HEAD's `cos-admin audit verify` over what REF wrote.
 * Exit 0 when every step passed, 1 with the failing step otherwise. Postgres only: that is where
 * instances of two releases share a database (the embedded SQLite default runs one process, and an
 * older release's migrator refuses a file that holds migrations it does not know).
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const [ref, databaseUrl] = process.argv.slice(2).filter((a) => a !== '--');
if (ref === undefined || databaseUrl === undefined || !/^postgres(ql)?:\/\//.test(databaseUrl)) {
  process.stderr.write('usage: node scripts/upgrade-check.mjs REF postgres://user@host:port/empty_database\n');
  process.exit(2);
}

const started = Date.now();
const step = (what) => process.stdout.write(`upgrade-check: ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
const fail = (what) => {
  process.stderr.write(`upgrade-check: FAILED: ${what}\n`);
  process.exitCode = 1;
};
const pnpm = (args, cwd) => execFileSync('npx', ['-y', 'pnpm@10', ...args], { cwd, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, npm_config_audit: 'false' } });
const cli = (main, args, env = {}) =>
  execFileSync(process.execPath, [main, ...args], { cwd: ROOT, encoding: 'utf8', env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: databaseUrl, ...env } });

const commit = execFileSync('git', ['rev-parse', '--verify', `${ref}^{commit}`], { cwd: ROOT, encoding: 'utf8' }).trim();
const work = mkdtempSync(join(tmpdir(), 'cos-upgrade-check-'));
const previous = join(work, 'previous');
let server;
try {
  execFileSync('bash', ['-c', `mkdir -p "$1" && git archive --format=tar "$2" | tar -x -C "$1"`, 'extract', previous, commit], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  pnpm(['install', '--frozen-lockfile', '--prefer-offline'], previous);
  pnpm(['build'], previous);
  step(`built the previous release ${commit.slice(0, 12)}`);

  pnpm(['build'], ROOT);
  const head = join(ROOT, 'packages/cli/dist/main.js');
  const applied = JSON.parse(cli(head, ['migrate', '--json'])).applied;
  step(`migrated the database with this checkout (${applied.length} migrations)`);

  const rateLimit = 3;
  server = spawn(process.execPath, [join(previous, 'packages/cli/dist/main.js'), 'serve', '--bootstrap'], {
    cwd: work,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: databaseUrl, PORT: '0', RATE_LIMIT_PER_MINUTE: String(rateLimit) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  server.stdout.on('data', (d) => (out += d));
  server.stderr.on('data', (d) => (out += d));
  const deadline = Date.now() + 60_000;
  let base;
  while (base === undefined) {
    const line = out.split('\n').find((l) => l.startsWith('{') && l.includes('"address"'));
    if (line !== undefined) base = `${JSON.parse(line).address}/v1`;
    else if (server.exitCode !== null) throw new Error(`the previous release's serve exited (${server.exitCode}) on the migrated schema:\n${out}`);
    else if (Date.now() > deadline) throw new Error(`the previous release's serve did not listen within 60 s:\n${out}`);
    else await new Promise((r) => setTimeout(r, 50));
  }
  const platformKey = /svc_live_[A-Za-z0-9]{48}/.exec(out)?.[0];
  if (platformKey === undefined) throw new Error(`the previous release printed no platform key:\n${out}`);
  step(`the previous release serves on the migrated schema (${base})`);

  const call = async (method, path, key, body) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: text === '' ? null : JSON.parse(text) };
  };
  const expectStatus = (what, got, status) => {
    if (got.status !== status) throw new Error(`${what}: ${got.status} ${JSON.stringify(got.json)}, expected ${status}`);
  };
  const org = await call('POST', '/organisations', platformKey, { name: 'Upgrade Check Ltd', slug: 'upgrade-check' });
  expectStatus('create an organisation', org, 201);
  const issued = await call('POST', `/organisations/${org.json.id}/api-keys`, platformKey, { label: 'upgrade check' });
  expectStatus('issue a key', issued, 201);
  expectStatus('authenticate with it', await call('GET', `/organisations/${org.json.id}`, issued.json.key), 200);
  expectStatus('revoke it', await call('DELETE', `/organisations/${org.json.id}/api-keys/${issued.json.id}`, issued.json.key), 204);
  expectStatus('use it once revoked', await call('GET', `/organisations/${org.json.id}`, issued.json.key), 401);
  // A fresh key under a limit of 3 a minute: 429 within the next few requests, even if a UTC minute
  // begins in between (at most two windows are touched by 3 × (limit + 1) requests sent at once).
  const second = await call('POST', `/organisations/${org.json.id}/api-keys`, platformKey, { label: 'rate limit' });
  expectStatus('issue a second key', second, 201);
  let limited = false;
  for (let i = 0; i < 3 * (rateLimit + 1) && !limited; i += 1) limited = (await call('GET', `/organisations/${org.json.id}`, second.json.key)).status === 429;
  if (!limited) throw new Error(`no 429 within ${3 * (rateLimit + 1)} requests at RATE_LIMIT_PER_MINUTE=${rateLimit}`);
  step('issue, authenticate, revoke (401 at once) and rate limit (429) on the previous release');

  server.kill('SIGTERM');
  await new Promise((r) => server.once('exit', r));
  server = undefined;
  const verify = JSON.parse(cli(head, ['audit', 'verify', '--json']));
  if (verify.status !== 'ok') throw new Error(`audit verify: ${JSON.stringify(verify)}`);
  step(`this checkout's audit verify accepts what the previous release wrote (${verify.organisations.length} organisations, status ok)`);
  step('passed');
} catch (e) {
  fail(e instanceof Error ? e.message : String(e));
} finally {
  if (server !== undefined && server.exitCode === null) server.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
}
