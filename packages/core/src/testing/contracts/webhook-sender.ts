/**
 * Contract suite of WebhookSender (C-59): what any sender must do against a real HTTP receiver on
 * 127.0.0.1. The signature is checked here with node:crypto by the Standard Webhooks rule itself
 * (HMAC-SHA256 keyed with the base64-decoded secret over "id.timestamp.body", `v1,<base64>`), not
 * with the library the sender may use, so the suite also proves the library signs as documented.
 *
 * `makeSender(policy)` builds a sender under a destination policy: the suite's receivers are on
 * loopback over http, so most tests allow both; the destination tests show that the same receivers
 * are unreachable (nothing sent) under the default policy.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { WebhookDestinationPolicy } from '../../domain/webhook-destination.js';
import type { WebhookHostResolver, WebhookRequest, WebhookSender } from '../../ports/webhook-sender.js';

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

interface Seen {
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
  readonly method: string | undefined;
}

async function receiver(handle: Handler, host = '127.0.0.1'): Promise<{ url: string; port: number; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (d: string) => (body += d));
    req.on('end', () => {
      seen.push({ headers: req.headers, body, method: req.method });
      handle(req, body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function expectedSignature(secret: string, id: string, timestamp: string, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** Local receivers: http and loopback allowed. */
const LOCAL: WebhookDestinationPolicy = { allowHttp: true, allowPrivate: true };

/** Listening on `::` (IPv4 and IPv6, when the host has IPv6) reaches every loopback spelling. */
async function hasIpv6Loopback(): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(0, '::1', () => server.close(() => resolve(true)));
  });
}

export function describeWebhookSender(name: string, makeSender: (policy: WebhookDestinationPolicy) => WebhookSender): void {
  describe(`WebhookSender contract: ${name}`, () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const closers: Array<() => Promise<void>> = [];
    const request = (url: string, overrides: Partial<WebhookRequest> = {}): WebhookRequest => ({
      url,
      secret,
      messageId: '4f6a2c1e-0b9d-4e57-8a3c-2d1f0e9b8a76',
      timestamp: new Date('2026-11-24T08:00:00.000Z'),
      body: JSON.stringify({ type: 'api_key.revoked', timestamp: '2026-11-24T08:00:00.000Z', data: { key_id: 'k' } }),
      timeoutMs: 2_000,
      ...overrides,
    });

    afterEach(async () => {
      await Promise.all(closers.splice(0).map((c) => c()));
    });

    it('C-59: POSTs the exact body with webhook-id, webhook-timestamp and a v1 HMAC-SHA256 signature; 2xx is ok', async () => {
      const r = await receiver((_req, _body, res) => res.writeHead(204).end());
      closers.push(r.close);
      const req = request(r.url);
      expect(await makeSender(LOCAL).send(req)).to.deep.equal({ ok: true, status: 204 });
      expect(r.seen).to.have.length(1);
      const [got] = r.seen;
      expect(got!.method).to.equal('POST');
      expect(got!.body).to.equal(req.body);
      expect(got!.headers['content-type']).to.match(/^application\/json/);
      expect(got!.headers['webhook-id']).to.equal(req.messageId);
      expect(got!.headers['webhook-timestamp']).to.equal(String(req.timestamp.getTime() / 1000));
      expect(got!.headers['webhook-signature']).to.equal(expectedSignature(secret, req.messageId, String(req.timestamp.getTime() / 1000), req.body));
    });

    it('C-59: a non-2xx answer, a redirect, a refused connection and a timeout are failures (results, never throws)', async () => {
      const failing = await receiver((_req, _body, res) => res.writeHead(503).end('down for maintenance'));
      const redirect = await receiver((_req, _body, res) => res.writeHead(302, { location: failing.url }).end());
      const silent = await receiver(() => undefined);
      closers.push(failing.close, redirect.close, silent.close);
      const sender = makeSender(LOCAL);
      expect(await sender.send(request(failing.url))).to.deep.equal({ ok: false, error: 'answered 503' });
      expect(await sender.send(request(redirect.url))).to.deep.equal({ ok: false, error: 'answered 302' });
      expect(failing.seen, 'the redirect was not followed').to.have.length(1);
      const refused = await sender.send(request('http://127.0.0.1:1/hook'));
      expect(refused.ok).to.equal(false);
      const started = Date.now();
      const timedOut = await sender.send(request(silent.url, { timeoutMs: 200 }));
      expect(timedOut).to.deep.equal({ ok: false, error: 'no answer within 200 ms' });
      expect(Date.now() - started).to.be.below(2_000);
    });

    it('C-59: a receiver streaming an endless answer: the sender takes the status and hangs up, the receiver could send less than 1 MiB, and the attempt ends long before its timeout', async () => {
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      let sent = 0;
      let hungUp = false;
      const r = await receiver((_req, _body, res) => {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        // 64 KiB every 5 ms (about 12 MiB/s) until the sender hangs up: a sender reading the
        // answer would take some 50 MiB within the 4 s bound and then time out.
        let timer: NodeJS.Timeout | undefined;
        const pump = (): void => {
          if (res.destroyed) return;
          res.write(chunk, (err) => {
            if (!err) sent += chunk.length;
          });
          timer = setTimeout(pump, 5);
        };
        res.on('close', () => {
          hungUp = true;
          clearTimeout(timer);
        });
        pump();
      });
      closers.push(r.close);
      const started = Date.now();
      const result = await makeSender(LOCAL).send(request(r.url, { timeoutMs: 4_000 }));
      const took = Date.now() - started;
      expect(result).to.deep.equal({ ok: true, status: 200 });
      expect(took, 'the attempt ends without waiting for the body').to.be.below(2_000);
      for (let i = 0; i < 200 && !hungUp; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(hungUp, 'the sender closed the connection').to.equal(true);
      expect(sent, 'bytes the receiver could send before the sender hung up').to.be.below(1024 * 1024);
    });

    it('C-59 (SSRF): by default no request reaches a loopback receiver however its address is written (localhost, 127.1, 2130706433, 0x7f.1, 0.0.0.0, [::1], [::ffff:127.0.0.1]); http:// is refused too; each failure says why', async () => {
      const v6 = await hasIpv6Loopback();
      // On `::` the receiver answers on every loopback spelling (IPv4, IPv6 and IPv4-mapped).
      const r = await receiver((_req, _body, res) => res.writeHead(204).end(), v6 ? '::' : '127.0.0.1');
      closers.push(r.close);
      const p = r.port;
      const refused: Array<[string, string]> = [
        [`https://localhost:${p}/hook`, 'host localhost is an internal name'],
        [`https://127.1:${p}/hook`, 'address 127.0.0.1 is not allowed (loopback)'],
        [`https://2130706433:${p}/hook`, 'address 127.0.0.1 is not allowed (loopback)'],
        [`https://0x7f.1:${p}/hook`, 'address 127.0.0.1 is not allowed (loopback)'],
        [`https://0.0.0.0:${p}/hook`, 'address 0.0.0.0 is not allowed (unspecified)'],
        [`https://127.0.0.1:${p}/hook`, 'address 127.0.0.1 is not allowed (loopback)'],
        ...(v6
          ? ([
              [`https://[::1]:${p}/hook`, 'address ::1 is not allowed (loopback)'],
              [`https://[::ffff:127.0.0.1]:${p}/hook`, 'address ::ffff:7f00:1 is not allowed (loopback: IPv4-mapped 127.0.0.1)'],
            ] as Array<[string, string]>)
          : []),
      ];
      // Control: with http and private addresses allowed, each spelling but 0.0.0.0 does reach it.
      const open = makeSender(LOCAL);
      let reached = 0;
      for (const [url] of refused) {
        if (url.includes('0.0.0.0')) continue;
        expect(await open.send(request(url.replace('https:', 'http:'))), url).to.deep.equal({ ok: true, status: 204 });
        reached += 1;
      }
      expect(r.seen).to.have.length(reached);

      // The default policy, and http allowed but private addresses not: the same receiver, unreachable.
      const strict = makeSender({ allowHttp: false, allowPrivate: false });
      const httpOnly = makeSender({ allowHttp: true, allowPrivate: false });
      for (const [url, reason] of refused) {
        expect(await strict.send(request(url)), url).to.deep.equal({ ok: false, error: reason });
        expect(await httpOnly.send(request(url.replace('https:', 'http:'))), url).to.deep.equal({ ok: false, error: reason });
        expect(await strict.send(request(url.replace('https:', 'http:'))), url).to.deep.equal({ ok: false, error: 'http:// is not allowed, only https://' });
      }
      expect(r.seen, 'nothing was sent under the refusing policies').to.have.length(reached);
    });
  });
}

/**
 * Contract suite of WebhookHostResolver (C-59, SSRF): the addresses of a name, as IP addresses;
 * nothing (never an error) for a name that does not resolve. `makeResolver` must resolve
 * `localhost` as the system does (to loopback).
 */
export function describeWebhookHostResolver(name: string, makeResolver: () => WebhookHostResolver): void {
  describe(`WebhookHostResolver contract: ${name}`, () => {
    it('C-59: localhost resolves to loopback IP addresses only', async () => {
      const addresses = await makeResolver().resolve('localhost');
      expect(addresses.length).to.be.at.least(1);
      for (const a of addresses) {
        expect(isIP(a), a).to.be.oneOf([4, 6]);
        expect(a, a).to.match(/^(127\.|::1$)/);
      }
    });

    it('C-59: a name that does not resolve gives no address and no error', async () => {
      expect(await makeResolver().resolve('no-such-host.invalid')).to.deep.equal([]);
    });
  });
}
