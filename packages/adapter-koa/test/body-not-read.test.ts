/**
 * C-141: a body sent with a method that takes none is not read. A read is answered without it and,
 * when the body is still arriving, the answer closes the connection; a DELETE is refused (401)
 * without it, and once admitted it waits for the body before it acts. Over real sockets: the body
 * declared here never arrives in full.
 */
import { connect, type Socket } from 'node:net';
import { expect } from 'chai';
import { OPERATOR } from '@cos/core';
import { createWorld, UNKNOWN_KEY, type World } from './support/world.js';

/** A raw connection and everything the server wrote on it. */
interface Raw {
  readonly socket: Socket;
  received: string;
  closed: boolean;
}

function open(baseUrl: string, first: string): Promise<Raw> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const raw: Raw = { socket, received: '', closed: false };
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (raw.received += d));
    socket.on('error', () => undefined);
    socket.once('close', () => (raw.closed = true));
    socket.once('connect', () => {
      socket.write(first);
      resolve(raw);
    });
    socket.once('error', reject);
  });
}

async function waitFor(what: string, check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const head = (method: string, path: string, headers: Record<string, string>): string =>
  `${method} ${path} HTTP/1.1\r\nHost: localhost\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;

describe('adapter-koa: a body sent with a method that takes none is not read (C-141)', () => {
  let world: World;
  const raws: Raw[] = [];
  beforeEach(async () => {
    world = await createWorld({ config: { unauthRateLimitPerMinute: 1_000_000, rateLimitPerMinute: 1_000_000 } });
  });
  afterEach(async () => {
    for (const r of raws.splice(0)) r.socket.destroy();
    await world.close();
  });
  const tracked = async (first: string): Promise<Raw> => {
    const r = await open(world.listening.baseUrl, first);
    raws.push(r);
    return r;
  };

  it('C-141: GET /v1/health and an authenticated GET declaring 100,000 bytes are answered 200 at once with Connection: close, and the server closes the connection', async () => {
    for (const [path, headers] of [
      ['/v1/health', {}],
      [`/v1/organisations/${world.own.orgId}`, { Authorization: `Bearer ${world.own.key}` }],
    ] as const) {
      const r = await tracked(`${head('GET', path, { ...headers, 'Content-Length': '100000' })}{`);
      await waitFor(`${path} answered and closed`, () => r.closed);
      expect(r.received, path).to.match(/^HTTP\/1\.1 200 /);
      expect(r.received, path).to.match(/\r\nConnection: close\r\n/i);
    }
  });

  it('C-141: a GET without a body, or with all of it, keeps its keep-alive connection', async () => {
    const r = await tracked(`${head('GET', '/v1/health', { 'Content-Length': '2' })}{}${head('GET', '/v1/health', {})}`);
    await waitFor('two answers', () => r.received.split('HTTP/1.1 200 ').length === 3);
    expect(r.received).to.not.match(/Connection: close/i);
    expect(r.closed).to.equal(false);
  });

  it('C-141: a DELETE declaring a body is refused 401 without it when its key does not authenticate; an admitted one waits for the body before it revokes', async () => {
    const issued = await world.tc.core.apiKeys.issue(OPERATOR, world.own.orgId, { label: 'spare' });
    const path = `/v1/organisations/${world.own.orgId}/api-keys/${issued.key.id}`;
    const refused = await tracked(`${head('DELETE', path, { Authorization: `Bearer ${UNKNOWN_KEY}`, 'Content-Length': '100000' })}{`);
    await waitFor('the 401 and the close', () => refused.closed);
    expect(refused.received).to.match(/^HTTP\/1\.1 401 [^]*\r\nConnection: close\r\n/i);

    const admitted = await tracked(`${head('DELETE', path, { Authorization: `Bearer ${world.own.key}`, 'Content-Length': '4' })}{`);
    // A round trip of another request later, the DELETE has neither answered nor acted.
    const other = await tracked(head('GET', '/v1/health', { Connection: 'close' }));
    await waitFor('the other request answered', () => other.closed);
    expect(admitted.received).to.equal('');
    expect((await world.tc.core.apiKeys.get(OPERATOR, world.own.orgId, issued.key.id)).revokedAt).to.equal(null);
    admitted.socket.write('  }');
    await waitFor('the 204', () => admitted.received.startsWith('HTTP/1.1 204 '));
    expect((await world.tc.core.apiKeys.get(OPERATOR, world.own.orgId, issued.key.id)).revokedAt).to.not.equal(null);
  });
});
