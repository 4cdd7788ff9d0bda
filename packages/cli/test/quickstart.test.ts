/**
 * The quickstart, scripted: `serve --bootstrap` (what `pnpm start` runs) on a fresh SQLite file,
 * then the README's curl flow: list organisations with the printed platform key, create one, issue
 * it a key, use that key, revoke it, and see the 401. Uses curl itself when it is installed.
 */
import { execFile, execFileSync } from 'node:child_process';
import { expect } from 'chai';
import { ensureBuilt, printedKeys, startServe, tempDir, type ServeProcess } from './support/cli.js';

before(async function () {
  this.timeout(180_000);
  await ensureBuilt();
});

interface Reply {
  status: number;
  body: any;
}

const HAVE_CURL = ((): boolean => {
  try {
    execFileSync('curl', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** `curl -s [-X M] [-H 'Authorization: Bearer K'] [-H 'Content-Type: application/json' -d BODY] URL` */
function call(method: string, url: string, key?: string, body?: unknown): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (key !== undefined) headers['Authorization'] = `Bearer ${key}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const parse = (status: number, text: string): Reply => ({ status, body: text === '' ? null : JSON.parse(text) });
  if (!HAVE_CURL) {
    return fetch(url, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) }).then(async (r) =>
      parse(r.status, await r.text()),
    );
  }
  const args = ['-s', '-X', method, ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`])];
  if (body !== undefined) args.push('-d', JSON.stringify(body));
  args.push('-w', '\n%{http_code}', url);
  return new Promise((resolve, reject) => {
    execFile('curl', args, (error, stdout) => {
      if (error) return reject(error);
      const at = stdout.lastIndexOf('\n');
      resolve(parse(Number(stdout.slice(at + 1)), stdout.slice(0, at)));
    });
  });
}

describe(`quickstart: serve --bootstrap, then the README's curl flow${HAVE_CURL ? '' : ' (fetch: curl is not installed)'}`, function () {
  this.timeout(60_000);
  const tmp = tempDir();
  let server: ServeProcess;
  let base: string;
  let platformKey: string;
  let org: any;
  let issued: any;

  before(async () => {
    server = startServe(['--bootstrap'], { DATABASE_URL: 'sqlite:./data/cos.sqlite', PORT: '0' }, tmp.dir);
    base = `${(await server.listening()).url}/v1`;
  });
  after(async () => {
    server.child.kill('SIGTERM');
    await server.exited();
    tmp.remove();
  });

  it('prints the platform key once, telling the operator to store it', () => {
    const keys = printedKeys(server.stdout());
    expect(keys).to.have.length(1);
    platformKey = keys[0] as string;
    expect(platformKey).to.match(/^svc_live_/);
    expect(server.stdout()).to.match(/Store this key now/);
  });

  it('C-4: GET /v1/health needs no key', async () => {
    const r = await call('GET', `${base}/health`);
    expect(r.status).to.equal(200);
    expect(r.body.status).to.equal('ok');
  });

  it('lists organisations with the platform key: the system organisation', async () => {
    const r = await call('GET', `${base}/organisations`, platformKey);
    expect(r.status).to.equal(200);
    expect(r.body.data.map((o: any) => [o.slug, o.is_system])).to.deep.equal([['platform', true]]);
    expect(r.body.meta.next_cursor).to.equal(null);
  });

  it('C-2: creates an organisation (201)', async () => {
    const r = await call('POST', `${base}/organisations`, platformKey, { name: 'Acme Ltd', slug: 'acme' });
    expect(r.status).to.equal(201);
    org = r.body;
    expect(org).to.include({ name: 'Acme Ltd', slug: 'acme', is_system: false });
  });

  it('C-2/C-22: issues the organisation a key (201, raw key once)', async () => {
    const r = await call('POST', `${base}/organisations/${org.id}/api-keys`, platformKey, { label: 'acme backend' });
    expect(r.status).to.equal(201);
    issued = r.body;
    expect(issued.key).to.match(/^svc_live_[A-Za-z0-9]{48}$/);
    expect(issued).to.include({ organisation_id: org.id, is_active: true, label: 'acme backend' });
  });

  it('uses the new key on its own organisation; it cannot list organisations (403)', async () => {
    const own = await call('GET', `${base}/organisations/${org.id}`, issued.key);
    expect(own.status).to.equal(200);
    expect(own.body.id).to.equal(org.id);
    const all = await call('GET', `${base}/organisations`, issued.key);
    expect(all.status).to.equal(403);
    expect(all.body.error).to.equal('FORBIDDEN');
  });

  it('revokes the key (204) and the next request with it is 401 (C-36)', async () => {
    const del = await call('DELETE', `${base}/organisations/${org.id}/api-keys/${issued.id}`, platformKey);
    expect(del.status).to.equal(204);
    expect(del.body).to.equal(null);
    const after = await call('GET', `${base}/organisations/${org.id}`, issued.key);
    expect(after.status).to.equal(401);
    expect(after.body).to.deep.include({ error: 'UNAUTHORIZED', message: 'Missing or invalid API key' });
  });
});
