/**
 * Secrets (C-15, C-16, C-22, C-31): a raw key (or its 48 random characters, or its SHA-256
 * digest) appears in no response but its own issuance, in no log line, and in no table cell (the
 * digest only in its one column); issuance responses carry Cache-Control: no-store; no response
 * carries X-Powered-By; and every digest comparison in the sources is constant-time.
 * Checked in process (CapturingLogger) and on a real `cos-admin serve` process (pino on stdout).
 */
import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack, type Stack } from '../support/stack.js';
import { createCast, type Cast } from '../support/fixture.js';
import { allCells } from '../support/snapshot.js';
import { Client } from '../support/http.js';
import { ensureBuilt, startServe, tempDir } from '../../../cli/test/support/cli.js';
import { keyLifecycleSession, leaksIn, reflectable, responseText, secretOf, type Exchange, type Secret } from '../support/secrets.js';

const REPO = fileURLToPath(new URL('../../../../', import.meta.url));

/** Leaks of any secret in the exchanges' responses, except the issuance of that very key and reflections of the caller's own input. */
function responseLeaks(exchanges: readonly Exchange[], secrets: readonly Secret[]): string[] {
  const out: string[] = [];
  for (const x of exchanges) {
    const text = responseText(x.response);
    const input = reflectable(x.request);
    for (const s of secrets) {
      if (x.issuance && x.response.json<{ key: string }>().key === s.raw) {
        // Its own issuance: the key exactly once, in the body's `key` field, nowhere else; never its digest.
        const occurrences = text.split(s.random).length - 1;
        if (occurrences !== 1) out.push(`issuance response repeats its key ${occurrences} times`);
        if (text.toLowerCase().includes(s.digest)) out.push('issuance response carries the digest');
        continue;
      }
      const leaks = leaksIn(text, s).filter((kind) => !(kind !== 'key digest' ? input.includes(s.random) : input.toLowerCase().includes(s.digest)));
      for (const kind of leaks) out.push(`${x.request.method} ${x.request.path.slice(0, 80)} -> ${x.response.status}: ${kind}`);
    }
  }
  return out;
}

function logLeaks(lines: readonly string[], secrets: readonly Secret[]): string[] {
  const out: string[] = [];
  for (const line of lines) for (const s of secrets) for (const kind of leaksIn(line, s)) out.push(`${kind} in log line: ${line.slice(0, 200)}`);
  return out;
}

describe('system: secrets stay secret (C-15, C-16, C-22, C-31)', function () {
  this.timeout(60_000);
  let stack: Stack;
  let cast: Cast;
  let exchanges: Exchange[];
  let secrets: Secret[];

  before(async () => {
    stack = await startStack({ config: { rateLimitPerMinute: 1_000_000, unauthRateLimitPerMinute: 1_000_000 } });
    cast = await createCast(stack.core, { spares: 1, expiringMs: 250 });
    const session = await keyLifecycleSession(stack.client, cast.platform.key, cast.platform.id);
    exchanges = session.exchanges;
    secrets = [...cast.rawKeys, ...session.issued].map(secretOf);
  });
  after(async () => {
    await stack?.close();
  });

  it('C-16: every key issuance response carries Cache-Control: no-store', () => {
    const issuances = exchanges.filter((x) => x.issuance);
    expect(issuances).to.have.length(3);
    for (const x of issuances) expect(x.response.headers.get('cache-control'), x.request.path).to.equal('no-store');
  });

  it('C-22: no response but its own issuance contains a raw key, its random part or its digest (error bodies included; the caller\'s own input echoed back aside)', () => {
    expect(exchanges.length).to.be.greaterThan(30);
    expect(responseLeaks(exchanges, secrets)).to.deep.equal([]);
  });

  it('C-16: no response carries X-Powered-By (successes, 4xx of every kind, 404 and 405)', () => {
    const statuses = new Set(exchanges.map((x) => x.response.status));
    for (const s of [200, 201, 204, 400, 401, 403, 404, 405, 415]) expect(statuses.has(s), `status ${s} exercised`).to.equal(true);
    expect(exchanges.filter((x) => x.response.headers.has('x-powered-by')).map((x) => x.request.path)).to.deep.equal([]);
  });

  it('C-31: no log line contains a raw key, its random part or its digest, even for keys sent in paths, queries, request ids and bodies', () => {
    const lines = stack.logger.entries.map((e) => JSON.stringify(e));
    expect(lines.length).to.be.greaterThan(30);
    expect(logLeaks(lines, secrets)).to.deep.equal([]);
  });

  it('C-31: no table cell holds a raw key or its random part; each digest is stored exactly once, in one column', async () => {
    const cells = await allCells(stack.store.knex);
    const problems: string[] = [];
    for (const s of secrets) {
      const raw = cells.filter((c) => c.value.includes(s.random));
      if (raw.length > 0) problems.push(`raw key in ${raw.map((c) => `${c.table}.${c.column}`).join(', ')}`);
      const digests = cells.filter((c) => c.value.toLowerCase().includes(s.digest));
      if (digests.length !== 1) problems.push(`digest stored ${digests.length} times: ${digests.map((c) => `${c.table}.${c.column}`).join(', ')}`);
    }
    const digestColumns = new Set(cells.filter((c) => secrets.some((s) => c.value.toLowerCase().includes(s.digest))).map((c) => `${c.table}.${c.column}`));
    expect(problems).to.deep.equal([]);
    expect([...digestColumns]).to.have.length(1);
  });

  it('C-31/C-51: a 429 for a path that carries a key echoes it only to the caller (instance), never to the log', async () => {
    const tiny = await startStack({ config: { rateLimitPerMinute: 1, unauthRateLimitPerMinute: 1 } });
    try {
      const tinyCast = await createCast(tiny.core, { spares: 1, expiringMs: 250 });
      const key = tinyCast.own.key;
      const x: Exchange[] = [];
      for (let i = 0; i < 3; i += 1) {
        const request = { method: 'GET', path: `/v1/organisations/${tinyCast.own.id}/api-keys/${key}`, headers: { authorization: `Bearer ${key}` } };
        x.push({ request, response: await tiny.client.send(request), issuance: false });
      }
      expect(x.map((e) => e.response.status)).to.include(429);
      const tinySecrets = tinyCast.rawKeys.map(secretOf);
      expect(responseLeaks(x, tinySecrets)).to.deep.equal([]);
      expect(logLeaks(tiny.logger.entries.map((e) => JSON.stringify(e)), tinySecrets)).to.deep.equal([]);
    } finally {
      await tiny.close();
    }
  });
});

describe('system: a real `cos-admin serve` process never prints a key but the bootstrap one, once (C-31)', function () {
  this.timeout(90_000);

  before(async function () {
    this.timeout(180_000);
    await ensureBuilt();
  });

  it('C-31: stdout/stderr of serve --bootstrap at LOG_LEVEL=debug: the bootstrap key exactly once, issued keys and digests never', async () => {
    const dir = tempDir('cos-secrets-');
    const server = startServe(
      ['--port', '0', '--bootstrap', '--json'],
      { DATABASE_URL: `sqlite:${join(dir.dir, 'cos.sqlite')}`, LOG_LEVEL: 'debug', HOST: '127.0.0.1', RATE_LIMIT_PER_MINUTE: '100000' },
      dir.dir,
    );
    try {
      const { url } = await server.listening();
      const out0 = server.stdout();
      const bootstrapKey = /svc_live_[A-Za-z0-9]{48}/.exec(out0)?.[0];
      expect(bootstrapKey, 'bootstrap printed a platform key').to.be.a('string');
      const orgs = await new Client(url).call('GET', '/v1/organisations', { key: bootstrapKey as string });
      const platformOrgId = orgs.json<{ data: { id: string; is_system: boolean }[] }>().data.find((o) => o.is_system)?.id as string;
      const session = await keyLifecycleSession(new Client(url), bootstrapKey as string, platformOrgId);
      server.child.kill('SIGTERM');
      const exit = await server.exited();
      const out = server.stdout();
      const err = server.stderr();
      expect(exit.code, `exit code; stderr: ${err}`).to.equal(0);

      const boot = secretOf(bootstrapKey as string);
      const all = `${out}\n${err}`;
      expect(all.split(boot.random).length - 1, 'bootstrap key printed exactly once').to.equal(1);
      expect(all.toLowerCase().includes(boot.digest), 'bootstrap key digest printed').to.equal(false);
      const issued = session.issued.map(secretOf);
      expect(issued).to.have.length(3);
      expect(logLeaks(all.split('\n'), issued)).to.deep.equal([]);
      expect(responseLeaks(session.exchanges, [...issued, boot].filter((s) => s !== boot))).to.deep.equal([]);
      // the log really is the service's request log, at debug level
      expect(out.split('\n').filter((l) => l.includes('"request completed"')).length).to.be.greaterThan(30);
    } finally {
      server.kill();
      dir.remove();
    }
  });
});

/** Every .ts file under packages/<pkg>/src (the shipped code; system-tests has none). */
function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
    }
  };
  for (const pkg of readdirSync(join(REPO, 'packages'))) {
    const src = join(REPO, 'packages', pkg, 'src');
    try {
      if (statSync(src).isDirectory()) walk(src);
    } catch {
      // a package without sources
    }
  }
  return out;
}

const SECRETISH = /digest|hash|secret|rawkey|raw_key|apikeyvalue/i;
const OPERAND = String.raw`[\w$.\[\]?!'"]+`;
const COMPARISON = new RegExp(String.raw`(${OPERAND})\s*(===|!==|==|!=)\s*(${OPERAND})`, 'g');
const HARMLESS = /^(null|undefined|true|false|\d+|'[^']*'|"[^"]*"|`[^`]*`)$|\.(length|size|byteLength)$|^typeof$/;

/** Lines that compare a digest-like value with ===/!== (or Buffer.equals / localeCompare / Buffer.compare). */
export function nonConstantTimeComparisons(file: string, text: string): string[] {
  const out: string[] = [];
  text.split('\n').forEach((line, i) => {
    const code = line.replace(/\/\/.*$/, '').replace(/^\s*\*.*$/, '');
    for (const m of code.matchAll(COMPARISON)) {
      const [left, right] = [m[1] ?? '', m[3] ?? ''];
      if (HARMLESS.test(left) || HARMLESS.test(right) || /typeof\s*$/.test(code.slice(0, m.index))) continue;
      if (SECRETISH.test(left) || SECRETISH.test(right)) out.push(`${file}:${i + 1}: ${line.trim()}`);
    }
    if (/(digest|hash|secret)\w*\s*\)?\.(equals|localeCompare)\(|Buffer\.compare\([^)]*(digest|hash)/i.test(code)) out.push(`${file}:${i + 1}: ${line.trim()}`);
  });
  return out;
}

describe('system: digests are compared in constant time wherever they are compared (C-31)', () => {
  it('C-31: no source file under packages/*/src compares a digest, hash or secret with ===, !==, ==, !=, .equals or localeCompare', () => {
    const files = sourceFiles();
    expect(files.length).to.be.greaterThan(20);
    const found = files.flatMap((f) => nonConstantTimeComparisons(f.slice(REPO.length), readFileSync(f, 'utf8')));
    expect(found).to.deep.equal([]);
  });

  it('C-31: the authentication path confirms the looked-up digest with crypto.timingSafeEqual', () => {
    const files = sourceFiles();
    const helpers = files.filter((f) => /timingSafeEqual\(/.test(readFileSync(f, 'utf8')));
    expect(helpers.map((f) => f.slice(REPO.length)), 'a timingSafeEqual helper').to.have.length.greaterThan(0);
    const auth = files.filter((f) => /class Admission\b/.test(readFileSync(f, 'utf8')));
    expect(auth).to.have.length(1);
    expect(readFileSync(auth[0] as string, 'utf8')).to.match(/digestsEqual\(|timingSafeEqual\(/);
  });

  it('the scanner itself flags a digest compared with === and passes the constant-time helper (self-test)', () => {
    expect(nonConstantTimeComparisons('x.ts', 'if (k.digest === digest) return k;')).to.have.length(1);
    expect(nonConstantTimeComparisons('x.ts', 'if (stored.keyHash !== hashOf(raw)) throw e;')).to.have.length(1);
    expect(nonConstantTimeComparisons('x.ts', 'return a.digest.equals(b)')).to.have.length(1);
    expect(nonConstantTimeComparisons('x.ts', 'if (!digestsEqual(credential.key.digest, digest)) throw e;')).to.deep.equal([]);
    expect(nonConstantTimeComparisons('x.ts', "if (constraint === 'api_keys_digest_unique') return 'digest';")).to.deep.equal([]);
    expect(nonConstantTimeComparisons('x.ts', 'return ba.length === bb.length && timingSafeEqual(ba, bb);')).to.deep.equal([]);
    expect(nonConstantTimeComparisons('x.ts', "if (typeof digest !== 'string') throw e;")).to.deep.equal([]);
  });
});
