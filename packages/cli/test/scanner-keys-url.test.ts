/**
 * SECRET_SCANNING_KEYS_URL: the programme's published key list fetched at start-up, every
 * SECRET_SCANNING_KEYS_REFRESH and at once (at most once a minute) on an alert naming an unknown key
 * identifier; a failed fetch keeps the last good list and is logged once. The "programme" is a local
 * plain-HTTP server (allowed here explicitly: SECRET_SCANNING_KEYS_URL takes http:// for this) and
 * the stack is the cli's own composition, in process, on SQLite.
 */
import { generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { OPERATOR, silentLogger } from '@cos/core';
import { CapturingLogger } from '@cos/core/testing';
import { buildContainer, closeContainer, CLI_TOKENS, coreOf, listen, loadConfig, makeStoreReady, storeOf, type HttpApp } from '@cos/cli';
import { ScannerKeyUrl, UNKNOWN_KEY_FETCH_INTERVAL_MS } from '../src/scanner-keys.js';

interface ProgrammeKey {
  readonly id: string;
  readonly privateKey: KeyObject;
  readonly entry: { key_identifier: string; key: string; is_current: boolean };
}

function programmeKey(): ProgrammeKey {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const id = randomBytes(16).toString('hex');
  return { id, privateKey, entry: { key_identifier: id, key: publicKey.export({ type: 'spki', format: 'pem' }) as string, is_current: true } };
}

/** The programme's key list server: what it answers is set by the test; it counts requests. */
class KeyListServer {
  requests = 0;
  status = 200;
  keys: ProgrammeKey[] = [];
  private constructor(private readonly server: Server) {}

  static async start(): Promise<KeyListServer> {
    let self!: KeyListServer;
    const server = createServer((_req, res) => {
      self.requests += 1;
      if (self.status !== 200) res.writeHead(self.status).end('unavailable');
      else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ public_keys: self.keys.map((k) => k.entry) }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self = new KeyListServer(server);
    return self;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/meta/public_keys/secret_scanning`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function signedAlert(body: string, key: ProgrammeKey): Record<string, string> {
  return {
    'content-type': 'application/json',
    'github-public-key-identifier': key.id,
    'github-public-key-signature': sign('sha256', Buffer.from(body), { key: key.privateKey, dsaEncoding: 'der' }).toString('base64'),
  };
}

describe('cli: SECRET_SCANNING_KEYS_URL, where the scanner\'s public keys are fetched', function () {
  this.timeout(30_000);
  let programme: KeyListServer;
  beforeEach(async () => {
    programme = await KeyListServer.start();
  });
  afterEach(async () => {
    await programme.close();
  });

  it('a failed fetch keeps the last good list and is logged once until a fetch succeeds', async () => {
    const a = programmeKey();
    programme.keys = [a];
    const logger = new CapturingLogger();
    const source = new ScannerKeyUrl({ url: programme.url, refreshMs: 3_600_000, logger });
    try {
      expect(await source.start()).to.equal(true);
      expect(source.keys().has?.(a.id)).to.equal(true);
      programme.status = 503;
      expect(await source.fetchNow()).to.equal(false);
      expect(await source.fetchNow()).to.equal(false);
      expect(source.keys().has?.(a.id), 'the last good list').to.equal(true);
      expect(logger.entries.filter((e) => e.level === 'error')).to.have.length(1);
      programme.status = 200;
      programme.keys = [{ ...a, entry: { ...a.entry, key: 'not a key' } }];
      expect(await source.fetchNow(), 'a list that does not parse').to.equal(false);
      expect(logger.entries.filter((e) => e.level === 'error')).to.have.length(1);
      programme.keys = [a];
      expect(await source.fetchNow()).to.equal(true);
      expect(logger.entries.filter((e) => e.level === 'info').map((e) => e.message)).to.include('secret-scanning key list fetched again');
    } finally {
      source.stop();
    }
  });

  it('fetched again every SECRET_SCANNING_KEYS_REFRESH, and on an unknown identifier at most once a minute', async () => {
    const a = programmeKey();
    const b = programmeKey();
    programme.keys = [a];
    let now = 1_000_000;
    const source = new ScannerKeyUrl({ url: programme.url, refreshMs: 3_600_000, logger: silentLogger, now: () => now });
    try {
      await source.start();
      expect(programme.requests).to.equal(1);
      programme.keys = [a, b];
      await source.refreshFor(b.id);
      expect(programme.requests).to.equal(2);
      expect(source.keys().has?.(b.id)).to.equal(true);
      await source.refreshFor('never-published');
      await source.refreshFor('never-published');
      expect(programme.requests, 'within a minute of the last one').to.equal(2);
      now += UNKNOWN_KEY_FETCH_INTERVAL_MS;
      await source.refreshFor('never-published');
      expect(programme.requests).to.equal(3);
      await source.refreshFor(a.id);
      expect(programme.requests, 'a known identifier fetches nothing').to.equal(3);
    } finally {
      source.stop();
    }
    const timed = new ScannerKeyUrl({ url: programme.url, refreshMs: 100, logger: silentLogger });
    try {
      await timed.start();
      const before = programme.requests;
      const deadline = Date.now() + 5_000;
      while (programme.requests < before + 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(programme.requests).to.be.at.least(before + 2);
    } finally {
      timed.stop();
    }
  });

  it('serve composition: an alert signed with a key published after start-up is verified after one fetch; without SECRET_SCANNING_PUBLIC_KEYS the route is on', async () => {
    const a = programmeKey();
    const b = programmeKey();
    programme.keys = [a];
    const config = loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent', SECRET_SCANNING_KEYS_URL: programme.url }, { envFile: false });
    const container = await buildContainer(config, { logger: silentLogger });
    try {
      await makeStoreReady(storeOf(container));
      await container.get<ScannerKeyUrl>(CLI_TOKENS.ScannerKeyUrl).start();
      const core = coreOf(container);
      const org = await core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
      const issued = await core.apiKeys.issue(OPERATOR, org.id, { label: 'leaky' });
      const app = await container.getAsync<HttpApp>(CLI_TOKENS.HttpApp);
      const server = await listen(app, '127.0.0.1', 0, silentLogger);
      try {
        programme.keys = [a, b]; // the programme rotates: B is published after this instance started
        const body = JSON.stringify([{ token: issued.rawKey, type: 'cos_api_key', url: 'https://github.com/a/b/blob/main/x', source: 'content' }]);
        const before = programme.requests;
        const res = await fetch(`${server.url}/v1/secret-scanning/alerts`, { method: 'POST', headers: signedAlert(body, b), body });
        expect(res.status).to.equal(200);
        expect(programme.requests).to.equal(before + 1);
        expect((await core.apiKeys.get(OPERATOR, org.id, issued.key.id)).revokedAt).to.not.equal(null);
        const stranger = programmeKey();
        const refused = await fetch(`${server.url}/v1/secret-scanning/alerts`, { method: 'POST', headers: signedAlert(body, stranger), body });
        expect(refused.status).to.equal(401);
      } finally {
        await server.stop();
      }
    } finally {
      await closeContainer(container);
    }
  });
});
