/**
 * Where the HTTP sender connects (C-59, SSRF) and what it reads (the answer's status, never its
 * body), against real local receivers (node:http / node:https on 127.0.0.1). Host names are resolved
 * through a StaticHostResolver, a hosts table standing in for DNS (the names used, such as
 * `hook.test`, exist in no real DNS), so a test decides what a name resolves to on each lookup.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { expect } from 'chai';
import { OPERATOR, WebhookDelivery, cryptoRandom, type WebhookRequest } from '@cos/core';
import { FakeClock, StaticHostResolver, createTestCore } from '@cos/core/testing';
import { createDnsHostResolver, createWebhookSender } from '@cos/webhook-sender';

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

function request(url: string, overrides: Partial<WebhookRequest> = {}): WebhookRequest {
  return {
    url,
    secret: SECRET,
    messageId: '0c7f6b8e-2d41-4a53-9c1e-5b7a3f9d2e10',
    timestamp: new Date(),
    body: '{"type":"api_key.issued"}',
    timeoutMs: 3_000,
    ...overrides,
  };
}

interface Seen {
  readonly host: string | undefined;
  readonly servername: string | false | null | undefined;
}

/** A receiver on 127.0.0.1 (http, or https with the given key and certificate) recording each request. */
async function receiver(
  handle: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(204).end(),
  tls?: { key: Buffer; cert: Buffer },
): Promise<{ port: number; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    seen.push({ host: req.headers.host, servername: (req.socket as TLSSocket).servername });
    req.resume().on('end', () => handle(req, res));
  };
  const server: Server = tls === undefined ? createServer(onRequest) : createTlsServer(tls, onRequest);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('webhook-sender: destinations and answers (C-59, SSRF)', () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(closers.splice(0).map((c) => c()));
  });

  it('C-59 (SSRF): at delivery, by default, every form of the issue is refused before any lookup or connection, with the reason as the error', async () => {
    const hosts = new StaticHostResolver({});
    const sender = createWebhookSender({ hosts });
    const forms: Array<[string, string]> = [
      ['https://localhost/hook', 'host localhost is an internal name'],
      ['https://127.1/hook', 'address 127.0.0.1 is not allowed (loopback)'],
      ['https://2130706433/hook', 'address 127.0.0.1 is not allowed (loopback)'],
      ['https://0x7f.1/hook', 'address 127.0.0.1 is not allowed (loopback)'],
      ['https://0.0.0.0/hook', 'address 0.0.0.0 is not allowed (unspecified)'],
      ['https://[::1]/hook', 'address ::1 is not allowed (loopback)'],
      ['https://[::ffff:127.0.0.1]/hook', 'address ::ffff:7f00:1 is not allowed (loopback: IPv4-mapped 127.0.0.1)'],
      ['https://127.0.0.1:3000/v1/organisations', 'address 127.0.0.1 is not allowed (loopback)'],
      ['https://169.254.169.254/latest/meta-data/', 'address 169.254.169.254 is not allowed (link-local)'],
      ['https://10.0.0.1/hook', 'address 10.0.0.1 is not allowed (private)'],
      ['https://[fd00::1]/hook', 'address fd00::1 is not allowed (unique-local)'],
      ['https://metadata.google.internal/computeMetadata/v1/', 'host metadata.google.internal is an internal name'],
      ['https://127.0.0.1:6379/', 'address 127.0.0.1 is not allowed (loopback)'],
      ['http://hooks.acme.example/cos', 'http:// is not allowed, only https://'],
    ];
    for (const [url, error] of forms) expect(await sender.send(request(url)), url).to.deep.equal({ ok: false, error });
    expect(hosts.calls, 'nothing was resolved').to.deep.equal([]);
  });

  it('C-59 (SSRF): a host name is resolved once per attempt, every address is checked, and the connection goes to the checked address', async () => {
    const r = await receiver();
    closers.push(r.close);
    const hosts = new StaticHostResolver({
      'hook.test': ['127.0.0.1'],
      'mixed.test': ['93.184.215.14', '127.0.0.1'],
      'nowhere.test': [],
    });
    // Private destinations allowed: the request reaches the address the resolver gave (no real DNS knows hook.test).
    const local = createWebhookSender({ allowHttp: true, allowPrivate: true, hosts });
    expect(await local.send(request(`http://hook.test:${r.port}/hook`))).to.deep.equal({ ok: true, status: 204 });
    expect(r.seen.map((s) => s.host)).to.deep.equal([`hook.test:${r.port}`]);
    expect(hosts.calls).to.deep.equal(['hook.test']);

    // Private destinations refused: the same name is refused on its address, one address of several is enough, nothing is sent.
    const strict = createWebhookSender({ allowHttp: true, hosts });
    expect(await strict.send(request(`http://hook.test:${r.port}/hook`))).to.deep.equal({ ok: false, error: 'address 127.0.0.1 of hook.test is not allowed (loopback)' });
    expect(await strict.send(request(`http://mixed.test:${r.port}/hook`))).to.deep.equal({ ok: false, error: 'address 127.0.0.1 of mixed.test is not allowed (loopback)' });
    expect(await strict.send(request(`http://nowhere.test:${r.port}/hook`))).to.deep.equal({ ok: false, error: 'connection failed (ENOTFOUND)' });
    expect(hosts.calls).to.deep.equal(['hook.test', 'hook.test', 'mixed.test', 'nowhere.test']);
    expect(r.seen).to.have.length(1);
  });

  it('C-59 (SSRF): DNS rebinding: a name that resolved to a public address when the endpoint was set and to loopback at delivery is refused at delivery; nothing reaches the receiver', async () => {
    const r = await receiver();
    closers.push(r.close);
    // First lookup (configuration): a public address; every later one (delivery): loopback.
    const hosts = new StaticHostResolver({ 'rebind.test': (call) => (call === 1 ? ['93.184.215.14'] : ['127.0.0.1']) });
    const tc = createTestCore({ clock: new FakeClock(new Date()), config: { webhookAllowHttp: true }, webhookHosts: hosts });
    const org = await tc.core.organisations.create(OPERATOR, { name: 'Acme', slug: 'acme' });
    await tc.core.webhooks.set(OPERATOR, org.id, `http://rebind.test:${r.port}/hook`);
    await tc.core.apiKeys.issue(OPERATOR, org.id, { label: 'ci' });
    const delivery = new WebhookDelivery({
      stores: tc.store.stores,
      sender: createWebhookSender({ allowHttp: true, hosts }),
      clock: tc.clock,
      random: cryptoRandom,
      logger: tc.logger,
      options: { timeoutMs: 2_000, maxAttempts: 3 },
    });
    expect(await delivery.deliverDue()).to.equal(1);
    const [n] = await tc.store.stores.outbox.list({}, { after: null, limit: 10 });
    expect(n).to.include({ status: 'pending', attempts: 1, lastError: 'address 127.0.0.1 of rebind.test is not allowed (loopback)' });
    expect(hosts.calls).to.deep.equal(['rebind.test', 'rebind.test']);
    expect(r.seen).to.deep.equal([]);
  });

  describe('https: the certificate and SNI stay on the host name while the connection goes to the checked address', () => {
    let dir: string;
    const certFor = (name: string): { key: Buffer; cert: Buffer } => {
      const key = join(dir, `${name}.key`);
      const cert = join(dir, `${name}.crt`);
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', `/CN=${name}`, '-addext', `subjectAltName=DNS:${name}`], { stdio: 'ignore' });
      return { key: readFileSync(key), cert: readFileSync(cert) };
    };
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'cos-webhook-tls-'));
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    it('C-59 (SSRF): https to hook.test resolved to 127.0.0.1: SNI is hook.test and its certificate is accepted; a certificate for another name fails and nothing is sent', async () => {
      const good = certFor('hook.test');
      const other = certFor('other.test');
      const r = await receiver(undefined, good);
      const wrong = await receiver(undefined, other);
      closers.push(r.close, wrong.close);
      const hosts = new StaticHostResolver({ 'hook.test': ['127.0.0.1'] });
      const sender = createWebhookSender({ allowPrivate: true, hosts, ca: [good.cert, other.cert] });
      expect(await sender.send(request(`https://hook.test:${r.port}/hook`))).to.deep.equal({ ok: true, status: 204 });
      expect(r.seen).to.deep.equal([{ host: `hook.test:${r.port}`, servername: 'hook.test' }]);
      expect(await sender.send(request(`https://hook.test:${wrong.port}/hook`))).to.deep.equal({ ok: false, error: 'TLS failed (ERR_TLS_CERT_ALTNAME_INVALID)' });
      expect(wrong.seen).to.deep.equal([]);
      // Not trusted at all (the system's authorities only): refused as well.
      const system = createWebhookSender({ allowPrivate: true, hosts });
      const untrusted = await system.send(request(`https://hook.test:${r.port}/hook`));
      expect(untrusted.ok).to.equal(false);
      expect((untrusted as { error: string }).error).to.match(/^TLS failed \(/);
      expect(r.seen).to.have.length(1);
    });
  });

  it('C-59: a receiver streaming as fast as it can, 10 attempts at once: each ends at once with its status, and RSS grows by less than 20 MB', async () => {
    const chunk = Buffer.alloc(256 * 1024, 0x62);
    let streams = 0;
    let closed = 0;
    const r = await receiver((_req, res) => {
      streams += 1;
      res.writeHead(200);
      // Write whenever the connection takes more: as fast as the reader reads.
      const pump = (): void => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      res.on('close', () => (closed += 1));
      pump();
    });
    closers.push(r.close);
    const sender = createWebhookSender({ allowHttp: true, allowPrivate: true });
    const before = process.memoryUsage().rss;
    const started = Date.now();
    const results = await Promise.all(Array.from({ length: 10 }, () => sender.send(request(`http://127.0.0.1:${r.port}/hook`, { timeoutMs: 5_000 }))));
    const took = Date.now() - started;
    const grown = process.memoryUsage().rss - before;
    expect(results).to.deep.equal(Array.from({ length: 10 }, () => ({ ok: true, status: 200 })));
    expect(streams).to.equal(10);
    expect(took, 'no attempt waited for the body').to.be.below(2_500);
    expect(grown, `RSS grew by ${grown} bytes`).to.be.below(20 * 1024 * 1024);
    for (let i = 0; i < 200 && closed < 10; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(closed, 'every connection was closed by the sender').to.equal(10);
  });

  it('C-59: the DNS resolver gives nothing (never an error) for a lookup that fails or does not answer within its bound', async () => {
    const failing = createDnsHostResolver({ lookup: () => Promise.reject(Object.assign(new Error('servfail'), { code: 'ESERVFAIL' })) });
    expect(await failing.resolve('hooks.acme.example')).to.deep.equal([]);
    const hanging = createDnsHostResolver({ lookup: () => new Promise(() => undefined), boundMs: 100 });
    const started = Date.now();
    expect(await hanging.resolve('hooks.acme.example')).to.deep.equal([]);
    expect(Date.now() - started).to.be.below(3_000);
    const answering = createDnsHostResolver({ lookup: () => Promise.resolve([{ address: '93.184.215.14' }, { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c' }]) });
    expect(await answering.resolve('hooks.acme.example')).to.deep.equal(['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c']);
  });

  it("C-59: the request's signal aborts the attempt (shutdown): it ends at once as 'attempt aborted', before its timeout", async () => {
    const r = await receiver(() => undefined); // never answers
    closers.push(r.close);
    const sender = createWebhookSender({ allowHttp: true, allowPrivate: true });
    const controller = new AbortController();
    const started = Date.now();
    const pending = sender.send(request(`http://127.0.0.1:${r.port}/hook`, { timeoutMs: 10_000, signal: controller.signal }));
    for (let i = 0; i < 200 && r.seen.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort();
    expect(await pending).to.deep.equal({ ok: false, error: 'attempt aborted' });
    expect(Date.now() - started).to.be.below(3_000);
    expect(r.seen).to.have.length(1);
  });
});
