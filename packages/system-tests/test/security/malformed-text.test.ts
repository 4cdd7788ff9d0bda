/**
 * Text that is not well-formed or that Postgres cannot hold, on every store (C-121, C-122): a lone
 * surrogate (`\ud800`) or U+0000 in a secret-scanning alert's optional fields costs no match its
 * revocation, is stored as U+FFFD, and leaves the audit chain verifiable; a lone surrogate in an API
 * body is stored, answered and read back as U+FFFD; U+0000 in a name, a label or a webhook URL's
 * host is 400 in the contract's shape, never 500, and changes nothing (in a URL's path it is stored
 * percent-encoded).
 */
import { generateKeyPairSync, sign } from 'node:crypto';
import { expect } from 'chai';
import { auditRecord, ChainVerifier, parseScannerKeys, type ChainRecord } from '@cos/core';
import { KEY_IDENTIFIER_HEADER, SIGNATURE_HEADER } from '@cos/adapter-koa';
import { createTenant, type Stack, type Tenant } from '../support/stack.js';
import { snapshot, diffSnapshots } from '../support/snapshot.js';
import { checkResponse } from '../support/shapes.js';
import { STORE_TARGETS, startStackOn } from '../support/targets.js';
import type { Incoming } from '../support/http.js';

const KEY_ID = 'scanner-key-1';
const scanner = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const keySet = parseScannerKeys(
  JSON.stringify({ public_keys: [{ key_identifier: KEY_ID, key: scanner.publicKey.export({ type: 'spki', format: 'pem' }), is_current: true }] }),
);

/** Every organisation's chain, recomputed from the store. */
async function verifyAll(stack: Stack): Promise<Array<{ organisation_id: string; status: string; broken?: unknown }>> {
  const out = [];
  for (const head of await stack.store.stores.audit.heads()) {
    const v = new ChainVerifier(head.organisationId);
    for (const e of await stack.store.stores.audit.chain(head.organisationId, { afterSeq: 0, limit: 10_000 })) v.push(auditRecord(e) as unknown as ChainRecord);
    out.push(v.finish());
  }
  return out;
}

function refusedOn(r: Incoming, field: string): void {
  expect(r.status, r.text).to.equal(400);
  expect(checkResponse(r)).to.deep.equal([]);
  const body = r.json<{ error: string; details: { field: string }[] }>();
  expect(body.error).to.equal('VALIDATION_ERROR');
  expect(body.details.map((d) => d.field)).to.deep.equal([field]);
}

for (const target of STORE_TARGETS) {
  describe(`system: malformed text on ${target.name} (C-121, C-122)`, function () {
    this.timeout(60_000);
    let stack: Stack;
    let running: Awaited<ReturnType<typeof startStackOn>>;
    let platform: Tenant;

    before(async function () {
      running = await startStackOn(target, 'malformed', { config: { rateLimitPerMinute: 1_000_000 }, secretScanning: { keys: () => keySet } });
      if (running === undefined) {
        this.skip();
        return;
      }
      stack = running.stack;
      platform = await createTenant(stack.core, 'platform', { system: true });
    });
    after(async () => {
      await running?.close();
    });

    /** Sends JSON text as the scanner, signed over exactly its bytes. */
    const alert = (text: string) =>
      stack.client.call('POST', '/v1/secret-scanning/alerts', {
        body: text,
        headers: { [KEY_IDENTIFIER_HEADER]: KEY_ID, [SIGNATURE_HEADER]: sign('sha256', Buffer.from(text), { key: scanner.privateKey, dsaEncoding: 'der' }).toString('base64') },
      });
    const exposures = async (orgId: string) =>
      (await stack.store.stores.audit.list({ organisationId: orgId, kind: 'api_key_exposed' }, { limit: 100, after: null })).map((e) => e.exposure);

    it('C-122: U+0000 in the first match\'s url (and source, type) revokes both keys of the alert, the fields stored with U+FFFD; a retry is a repeat', async () => {
      const a = await createTenant(stack.core, 'nul-a');
      const b = await createTenant(stack.core, 'nul-b');
      const text = JSON.stringify([
        { token: a.key, type: 'cos_api_key\u0000', url: 'https://github.example/a\u0000b', source: 'content\u0000' },
        { token: b.key, type: 'cos_api_key', url: 'https://github.example/b', source: 'content' },
      ]);
      const res = await alert(text);
      expect(res.status, res.text).to.equal(200);
      expect(res.json<Array<{ label: string }>>().map((f) => f.label)).to.deep.equal(['true_positive', 'true_positive']);
      for (const t of [a, b]) expect((await stack.client.call('GET', `/v1/organisations/${t.id}`, { key: t.key })).status, t.slug).to.equal(401);
      expect(await exposures(a.id)).to.deep.equal([{ type: 'cos_api_key\ufffd', url: 'https://github.example/a\ufffdb', source: 'content\ufffd' }]);
      expect(await exposures(b.id)).to.deep.equal([{ type: 'cos_api_key', url: 'https://github.example/b', source: 'content' }]);
      const again = await alert(text);
      expect(again.status, again.text).to.equal(200);
      expect(await exposures(a.id), 'a redelivery records nothing twice').to.have.length(1);
      expect((await verifyAll(stack)).filter((r) => r.status !== 'ok')).to.deep.equal([]);
    });

    it('C-121: a lone surrogate in a match\'s url revokes its key and the chain still verifies: what was hashed is what was stored', async () => {
      const c = await createTenant(stack.core, 'surrogate');
      // JSON.stringify writes a lone surrogate as the escape "\ud800", as a scanner's JSON would.
      const text = JSON.stringify([{ token: c.key, type: 'cos_api_key', url: 'https://github.example/\ud800x', source: '\udc00' }]);
      expect(text).to.include('\\ud800');
      const res = await alert(text);
      expect(res.status, res.text).to.equal(200);
      expect((await stack.client.call('GET', `/v1/organisations/${c.id}`, { key: c.key })).status).to.equal(401);
      expect(await exposures(c.id)).to.deep.equal([{ type: 'cos_api_key', url: 'https://github.example/\ufffdx', source: '\ufffd' }]);
      expect((await verifyAll(stack)).filter((r) => r.status !== 'ok')).to.deep.equal([]);
    });

    it('C-121: a lone surrogate in an organisation name is stored, answered and read back as U+FFFD', async () => {
      const created = await stack.client.call('POST', '/v1/organisations', { key: platform.key, body: JSON.stringify({ name: 'Acme \ud800 Ltd', slug: 'acme-surrogate' }) });
      expect(created.status, created.text).to.equal(201);
      const org = created.json<{ id: string; name: string }>();
      expect(org.name).to.equal('Acme \ufffd Ltd');
      const read = await stack.client.call('GET', `/v1/organisations/${org.id}`, { key: platform.key });
      expect(read.json<{ name: string }>().name).to.equal('Acme \ufffd Ltd');
    });

    it('C-121: U+0000 in a webhook URL\'s host, a key label or an organisation name is 400 on its field in the contract\'s shape, never 500, and nothing changes; in a URL\'s path it is stored percent-encoded', async () => {
      const own = await createTenant(stack.core, 'nul-fields');
      const before = await snapshot(stack.store.knex);
      refusedOn(await stack.client.call('PUT', `/v1/organisations/${own.id}/webhook-endpoint`, { key: own.key, body: { url: 'https://hoo\u0000ks.example/' } }), 'url');
      refusedOn(await stack.client.call('POST', `/v1/organisations/${own.id}/api-keys`, { key: own.key, body: { label: '\u0000' } }), 'label');
      refusedOn(await stack.client.call('PATCH', `/v1/organisations/${own.id}`, { key: own.key, body: { name: 'a\u0000' } }), 'name');
      expect(diffSnapshots(before, await snapshot(stack.store.knex))).to.deep.equal([]);
      // In a URL's path U+0000 is percent-encoded by the URL standard: stored cleaned.
      const hook = await stack.client.call('PUT', `/v1/organisations/${own.id}/webhook-endpoint`, { key: own.key, body: { url: 'https://hooks.example/a\u0000b' } });
      expect(hook.status, hook.text).to.be.oneOf([200, 201]);
      expect(hook.json<{ url: string }>().url).to.equal('https://hooks.example/a%00b');
    });
  });
}
