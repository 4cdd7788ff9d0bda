/**
 * One rule on every store for text Postgres cannot hold. A name or label with a
 * control character (U+0000 included) is 400 VALIDATION_ERROR on its field (C-11, C-13, C-23); a
 * cursor whose id part is not a record id (U+0000 included) is 400 on `cursor` (C-6), on
 * Postgres and SQLite alike. Nothing changes on a refusal.
 */
import { expect } from 'chai';
import { createTenant, type Stack, type Tenant } from '../support/stack.js';
import { snapshot, diffSnapshots } from '../support/snapshot.js';
import { checkResponse } from '../support/shapes.js';
import { openApiProblems } from '../support/openapi.js';
import { STORE_TARGETS, startStackOn } from '../support/targets.js';
import type { Incoming } from '../support/http.js';

const CONTROL = ['\u0000', '\u0001', '\u0007', '\u001b', '\u007f', '\u0085', '\u009f', '\t', '\n'];
const ISSUE = 'must not contain control characters';

function refusedOn(r: Incoming, field: string, issue?: string): void {
  expect(r.status, r.text).to.equal(400);
  expect([...checkResponse(r), ...openApiProblems(r)]).to.deep.equal([]);
  const body = r.json<{ error: string; details: { field: string; issue: string }[] }>();
  expect(body.error).to.equal('VALIDATION_ERROR');
  expect(body.details.map((d) => d.field)).to.deep.equal([field]);
  if (issue !== undefined) expect(body.details[0]!.issue).to.equal(issue);
}

const cursorOf = (at: string, id: string): string => Buffer.from(JSON.stringify([at, id]), 'utf8').toString('base64url');

for (const target of STORE_TARGETS) {
  describe(`system: control characters and cursor ids on ${target.name} (C-6, C-11, C-13, C-23)`, function () {
    this.timeout(60_000);
    let stack: Stack;
    let running: Awaited<ReturnType<typeof startStackOn>>;
    let platform: Tenant;
    let own: Tenant;

    before(async function () {
      running = await startStackOn(target, 'control', { config: { rateLimitPerMinute: 1_000_000 } });
      if (running === undefined) {
        this.skip();
        return;
      }
      stack = running.stack;
      platform = await createTenant(stack.core, 'platform', { system: true });
      own = await createTenant(stack.core, 'control');
    });
    after(async () => {
      await running?.close();
    });

    it('C-11, C-13: a name holding U+0000 or another control character (C0, DEL, C1, inner tab or newline) is 400 on field "name" for POST, PUT and PATCH, and nothing changes', async () => {
      const before = await snapshot(stack.store.knex);
      for (const c of CONTROL) {
        const name = `Acme${c}Ltd`;
        refusedOn(await stack.client.call('POST', '/v1/organisations', { key: platform.key, body: { name, slug: 'acme-control' } }), 'name', ISSUE);
        refusedOn(await stack.client.call('PUT', `/v1/organisations/${own.id}`, { key: own.key, body: { name } }), 'name', ISSUE);
        refusedOn(await stack.client.call('PATCH', `/v1/organisations/${own.id}`, { key: own.key, body: { name } }), 'name', ISSUE);
      }
      expect(diffSnapshots(before, await snapshot(stack.store.knex))).to.deep.equal([]);
      // Surrounding blanks (tabs and newlines too) are trimmed first, as before (C-13).
      const trimmed = await stack.client.call('PATCH', `/v1/organisations/${own.id}`, { key: own.key, body: { name: '\t Acme Ltd\n' } });
      expect(trimmed.status, trimmed.text).to.equal(200);
      expect(trimmed.json<{ name: string }>().name).to.equal('Acme Ltd');
    });

    it('C-11, C-23: a key label holding U+0000 or another control character is 400 on field "label", and no key is issued', async () => {
      const before = await snapshot(stack.store.knex);
      for (const c of CONTROL) {
        refusedOn(await stack.client.call('POST', `/v1/organisations/${own.id}/api-keys`, { key: own.key, body: { label: `ci${c}key` } }), 'label', ISSUE);
      }
      expect(diffSnapshots(before, await snapshot(stack.store.knex))).to.deep.equal([]);
    });

    it('C-6: a cursor whose id part holds U+0000 or is no record id is 400 on field "cursor" on all three lists', async () => {
      const at = new Date().toISOString();
      const lists = ['/v1/organisations', `/v1/organisations/${own.id}/members`, `/v1/organisations/${own.id}/api-keys`];
      const badIds = [`${own.id}\u0000`, '\u0000', 'a\u0000b', 'not-a-uuid', own.id.toUpperCase().replace(/-/g, '')];
      for (const path of lists) {
        for (const id of badIds) {
          const r = await stack.client.call('GET', `${path}?cursor=${cursorOf(at, id)}`, { key: platform.key });
          refusedOn(r, 'cursor');
        }
        const good = await stack.client.call('GET', `${path}?cursor=${cursorOf(at, own.id)}`, { key: platform.key });
        expect(good.status, `${path}: ${good.text}`).to.equal(200);
      }
    });
  });
}
