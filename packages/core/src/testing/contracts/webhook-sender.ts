/**
 * Contract suite of WebhookSender (C-59): what any sender must do against a real HTTP receiver on
 * 127.0.0.1. The signature is checked here with node:crypto by the Standard Webhooks rule itself
 * (HMAC-SHA256 keyed with the base64-decoded secret over "id.timestamp.body", `v1,<base64>`), not
 * with the library the sender may use, so the suite also proves the library signs as documented.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { WebhookRequest, WebhookSender } from '../../ports/webhook-sender.js';

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

interface Seen {
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
  readonly method: string | undefined;
}

async function receiver(handle: Handler): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (d: string) => (body += d));
    req.on('end', () => {
      seen.push({ headers: req.headers, body, method: req.method });
      handle(req, body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
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

export function describeWebhookSender(name: string, makeSender: () => WebhookSender): void {
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
      expect(await makeSender().send(req)).to.deep.equal({ ok: true, status: 204 });
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
      const sender = makeSender();
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
  });
}
