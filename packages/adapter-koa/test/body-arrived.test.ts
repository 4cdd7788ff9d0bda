/**
 * C-10: a body whose declared length has all arrived is read from the request stream's buffer, even
 * before Node's parser marks the message complete (over TCP, a body sent with its headers is in the
 * buffer one microtask after the request's callback, while `complete` is still false). The stream
 * must still end afterwards, as it does when read whole: a host waiting for the request's 'end'
 * (on-finished, a logging middleware) would otherwise wait until the connection closes.
 */
import { once } from 'node:events';
import { createServer, request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { readJsonBytes } from '../src/body.js';

interface Seen {
  completeWhenRead: boolean;
  bytes: string;
  ended: boolean;
}

describe('adapter-koa: a body read before its message is complete (C-10)', () => {
  it('C-10: a body sent with its headers is read one microtask after the callback, whole, and the request still ends', async () => {
    const seen: Seen[] = [];
    const server = createServer((req: IncomingMessage, res) => {
      void (async () => {
        await undefined;
        const completeWhenRead = req.complete;
        const bytes = (await readJsonBytes(req, 1024)).toString('utf8');
        const ended = await Promise.race([once(req, 'end').then(() => true), new Promise<boolean>((r) => setTimeout(() => r(req.readableEnded), 2_000))]);
        seen.push({ completeWhenRead, bytes, ended });
        res.end('ok');
      })();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    try {
      for (const body of ['{"a":1}', '{"token":"svc_live_x"}']) {
        await new Promise<void>((resolve, reject) => {
          const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
            res.resume();
            res.on('end', resolve);
          });
          req.on('error', reject);
          req.end(body);
        });
      }
    } finally {
      server.close();
    }
    expect(seen.map((s) => s.bytes)).to.deep.equal(['{"a":1}', '{"token":"svc_live_x"}']);
    expect(seen.map((s) => s.completeWhenRead), 'read before the parser marked the message complete').to.deep.equal([false, false]);
    expect(seen.map((s) => s.ended), "the request's 'end' came").to.deep.equal([true, true]);
  });
});
