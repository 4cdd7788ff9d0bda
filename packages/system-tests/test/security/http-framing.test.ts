/**
 * What the HTTP layer answers must agree with what the store holds, and
 * every answer is in the contract's shape with X-Request-Id (C-15) and the X-RateLimit-* headers
 * (C-52).
 *  - A DELETE whose framing Node's parser refuses (Transfer-Encoding other than chunked, a bad
 *    chunk) is answered 400 and revokes nothing: no route acts on a request that was refused.
 *  - A parse error behind a request in flight (pipelined garbage) leaves that request's answer as
 *    the answer: 204, and the key is revoked.
 *  - No Host, an Expect other than 100-continue, CONNECT: answered in the standard error shape,
 *    not with Node's bare 400 / 417 / closed connection.
 * On SQLite and on Postgres (always in CI).
 */
import { expect } from 'chai';
import { OPERATOR } from '@cos/core';
import { createTenant, type Stack, type Tenant } from '../support/stack.js';
import { snapshot, diffSnapshots } from '../support/snapshot.js';
import { parseRawAnswers, rawSocket, refusedByParser } from '../support/raw-http.js';
import { STORE_TARGETS, startStackOn } from '../support/targets.js';
import { sleep } from '../support/free-port.js';
import { connect } from 'node:net';

const MALFORMED = [{ field: 'request', issue: 'malformed HTTP request' }];

/** The request line and headers of a request, CRLF-terminated, without the blank line. */
function head(method: string, path: string, headers: Record<string, string>): string {
  return `${method} ${path} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}`;
}

/** Sends `parts` on one socket, `gapMs` apart, and returns everything the server writes until it closes. */
function slowSocket(baseUrl: string, parts: string[], gapMs: number): Promise<string> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: url.hostname, port: Number(url.port) }, async () => {
      for (const [i, part] of parts.entries()) {
        if (i > 0) await sleep(gapMs);
        if (!socket.destroyed) socket.write(part);
      }
    });
    let answer = '';
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer')));
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
  });
}

for (const target of STORE_TARGETS) {
  describe(`system: answers agree with the store when the HTTP framing is odd, on ${target.name} (C-15, C-35, C-40, C-52)`, function () {
    this.timeout(60_000);
    let stack: Stack;
    let running: Awaited<ReturnType<typeof startStackOn>>;
    let own: Tenant;

    before(async function () {
      running = await startStackOn(target, 'framing', { config: { rateLimitPerMinute: 1_000_000, unauthRateLimitPerMinute: 1_000_000 } });
      if (running === undefined) {
        this.skip();
        return;
      }
      stack = running.stack;
      own = await createTenant(stack.core, 'framing');
    });
    after(async () => {
      await running?.close();
    });

    async function spareKey(): Promise<string> {
      return (await stack.core.apiKeys.issue(OPERATOR, own.id, { label: 'spare' })).key.id;
    }
    const deleteHead = (keyId: string, extra: Record<string, string>): string =>
      head('DELETE', `/v1/organisations/${own.id}/api-keys/${keyId}`, { Host: 'localhost', Authorization: `Bearer ${own.key}`, ...extra });

    it('C-35, C-40: a DELETE with Transfer-Encoding identity, gzip, foo or "gzip, chunked" is 400 in the standard shape and revokes nothing (no api_key_revoked entry)', async () => {
      for (const te of ['identity', 'gzip', 'foo', 'gzip, chunked']) {
        const keyId = await spareKey();
        const before = await snapshot(stack.store.knex);
        const raw = await rawSocket(stack.baseUrl, `${deleteHead(keyId, { 'Transfer-Encoding': te })}\r\n${te.endsWith('chunked') ? '0\r\n\r\n' : ''}`);
        const answers = parseRawAnswers(raw);
        expect(answers, `${te}: ${raw}`).to.have.length(1);
        refusedByParser(answers[0]!, 400, MALFORMED, te);
        expect(diffSnapshots(before, await snapshot(stack.store.knex)), te).to.deep.equal([]);
      }
    });

    it('C-35, C-40: a DELETE whose chunked body is malformed (at once, or after a good chunk 150 ms later) is 400 and revokes nothing', async () => {
      const cases: { what: string; parts: (keyId: string) => string[] }[] = [
        { what: 'bad chunk size at once', parts: (id) => [`${deleteHead(id, { 'Transfer-Encoding': 'chunked' })}\r\nzz\r\n`] },
        { what: 'bad chunk after a good one', parts: (id) => [`${deleteHead(id, { 'Transfer-Encoding': 'chunked' })}\r\n3\r\nabc\r\n`, 'zz\r\n'] },
        { what: 'chunk longer than declared', parts: (id) => [`${deleteHead(id, { 'Transfer-Encoding': 'chunked' })}\r\n2\r\nabc\r\n0\r\n\r\n`] },
      ];
      for (const c of cases) {
        const keyId = await spareKey();
        const before = await snapshot(stack.store.knex);
        const raw = await slowSocket(stack.baseUrl, c.parts(keyId), 150);
        const answers = parseRawAnswers(raw);
        expect(answers, `${c.what}: ${raw}`).to.have.length(1);
        refusedByParser(answers[0]!, 400, MALFORMED, c.what);
        expect(diffSnapshots(before, await snapshot(stack.store.knex)), c.what).to.deep.equal([]);
      }
    });

    it('C-10: a POST with Transfer-Encoding identity is 400 in the standard shape and creates nothing', async () => {
      const before = await snapshot(stack.store.knex);
      const body = '{"label":"never"}';
      const raw = await rawSocket(
        stack.baseUrl,
        `${head('POST', `/v1/organisations/${own.id}/api-keys`, { Host: 'localhost', Authorization: `Bearer ${own.key}`, 'Content-Type': 'application/json', 'Transfer-Encoding': 'identity' })}\r\n${body}`,
      );
      const answers = parseRawAnswers(raw);
      expect(answers, raw).to.have.length(1);
      refusedByParser(answers[0]!, 400, MALFORMED, 'POST');
      expect(diffSnapshots(before, await snapshot(stack.store.knex))).to.deep.equal([]);
    });

    it('C-35, C-40: bytes Node cannot parse, pipelined behind a DELETE, leave the DELETE\'s answer as the answer: 204, and the key is revoked with one event', async () => {
      const keyId = await spareKey();
      const raw = await rawSocket(stack.baseUrl, `${deleteHead(keyId, {})}\r\nGARBAGE \u00ff\r\n\r\n`);
      const answers = parseRawAnswers(raw);
      expect(answers.map((a) => a.status), raw).to.deep.equal([204]);
      const key = await stack.core.apiKeys.get(OPERATOR, own.id, keyId);
      expect(key.revokedAt).to.not.equal(null);
      const events = await stack.store.knex('audit_entries').where({ kind: 'api_key_revoked', key_id: keyId });
      expect(events).to.have.length(1);
    });
  });
}

describe('system: requests Node would answer bare are answered in the standard error shape (C-15, C-52)', function () {
  this.timeout(30_000);
  let running: Awaited<ReturnType<typeof startStackOn>>;
  let stack: Stack;

  before(async () => {
    running = await startStackOn(STORE_TARGETS[0]!, 'bare');
    stack = running!.stack;
  });
  after(async () => {
    await running?.close();
  });

  it('C-15, C-52: an HTTP/1.1 request without Host is 400 VALIDATION_ERROR {field "host", "field required"} with X-Request-Id and X-RateLimit-*; HTTP/1.0 needs none', async () => {
    const answers = parseRawAnswers(await rawSocket(stack.baseUrl, 'GET /v1/health HTTP/1.1\r\n\r\n'));
    expect(answers).to.have.length(1);
    refusedByParser(answers[0]!, 400, [{ field: 'host', issue: 'field required' }], 'no Host');
    const http10 = parseRawAnswers(await rawSocket(stack.baseUrl, 'GET /v1/health HTTP/1.0\r\n\r\n'));
    expect(http10.map((a) => a.status)).to.deep.equal([200]);
  });

  it('C-15, C-52: an Expect other than 100-continue is 417 VALIDATION_ERROR {field "expect"} with X-Request-Id and X-RateLimit-*; 100-continue is served', async () => {
    for (const value of ['foo', '200-ok', 'continue']) {
      const answers = parseRawAnswers(await rawSocket(stack.baseUrl, `GET /v1/health HTTP/1.1\r\nHost: localhost\r\nExpect: ${value}\r\n\r\n`));
      expect(answers, value).to.have.length(1);
      refusedByParser(answers[0]!, 417, [{ field: 'expect', issue: 'not supported' }], value);
    }
    const served = parseRawAnswers(await rawSocket(stack.baseUrl, 'GET /v1/health HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n'));
    expect(served.map((a) => a.status)).to.deep.equal([100, 200]);
  });

  it('C-15: a client that hangs up mid-body got no answer: logged at info as "request aborted by the client" (status null), never as a 500 with a stack', async () => {
    const platform = await createTenant(stack.core, 'abort', { system: true });
    const before = stack.logger.entries.length;
    const url = new URL(stack.baseUrl);
    await new Promise<void>((resolve, reject) => {
      const socket = connect({ host: url.hostname, port: Number(url.port) }, () => {
        socket.write(`${head('POST', '/v1/organisations', { Host: 'localhost', Authorization: `Bearer ${platform.key}`, 'Content-Type': 'application/json', 'Content-Length': '100' })}\r\n{"name":"half`);
        setTimeout(() => socket.destroy(), 150);
      });
      socket.on('error', reject);
      socket.on('close', () => resolve());
    });
    let lines = stack.logger.entries.slice(before);
    for (let i = 0; i < 40 && !lines.some((e) => e.message === 'request aborted by the client'); i += 1) {
      await sleep(50);
      lines = stack.logger.entries.slice(before);
    }
    const aborted = lines.filter((e) => e.message === 'request aborted by the client');
    expect(aborted, JSON.stringify(lines)).to.have.length(1);
    expect(aborted[0]).to.deep.include({ level: 'info' });
    expect(aborted[0]!.fields).to.include({ status: null, aborted: true, method: 'POST', route: '/v1/organisations' });
    expect(lines.filter((e) => e.level === 'error' || e.fields.status === 500)).to.deep.equal([]);
  });

  it('C-15, C-52: CONNECT is 400 VALIDATION_ERROR {field "method"} with X-Request-Id and X-RateLimit-*, not a closed connection', async () => {
    const before = stack.logger.entries.length;
    const answers = parseRawAnswers(await rawSocket(stack.baseUrl, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'));
    expect(answers).to.have.length(1);
    refusedByParser(answers[0]!, 400, [{ field: 'method', issue: 'not supported' }], 'CONNECT');
    expect(stack.logger.entries.slice(before).map((e) => e.fields.status)).to.deep.equal([400]);
    expect((await stack.client.call('GET', '/v1/health')).status).to.equal(200);
  });
});
