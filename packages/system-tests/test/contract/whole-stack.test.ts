/**
 * The stack as the cli composes it (loadConfig -> buildContainer -> the container's HTTP app ->
 * the cli's listener) answers every kind of domain error with its own status and shape, not 500.
 * Guards the harness too: see container-stack.ts on keeping one @cos/core instance.
 */
import { expect } from 'chai';
import { CapturingLogger } from '@cos/core/testing';
import { startContainerStack, type ContainerStack } from '../support/container-stack.js';
import { createTenant, type Tenant } from '../support/stack.js';
import { checkResponse } from '../support/shapes.js';
import { openApiProblems } from '../support/openapi.js';

describe('system: the cli-composed stack maps every domain error to its status (C-9, C-33, C-51)', function () {
  this.timeout(30_000);
  let stack: ContainerStack;
  let a: Tenant;
  let b: Tenant;
  const logger = new CapturingLogger();

  before(async () => {
    stack = await startContainerStack({ DATABASE_URL: 'sqlite::memory:', RATE_LIMIT_PER_MINUTE: '6' }, logger);
    a = await createTenant(stack.core, 'whole-a');
    b = await createTenant(stack.core, 'whole-b');
  });
  after(async () => {
    await stack?.close();
  });

  it('C-33: 401, 403, 400, 404, 405 and 429 through buildContainer, each in the contract shape; no error logged', async () => {
    const cases: [string, string, string | undefined, unknown, number][] = [
      ['GET', `/v1/organisations/${a.id}`, 'svc_live_' + 'x'.repeat(48), undefined, 401],
      ['GET', `/v1/organisations/${b.id}`, a.key, undefined, 403],
      ['PATCH', `/v1/organisations/${a.id}`, a.key, { slug: 'nope' }, 400],
      ['GET', `/v1/organisations/${a.id}/api-keys/00000000-0000-4000-8000-000000000000`, a.key, undefined, 404],
      ['DELETE', `/v1/organisations/${a.id}`, a.key, undefined, 405],
      ['GET', '/v1/nowhere', undefined, undefined, 404],
      ['GET', `/v1/organisations/${a.id}`, a.key, undefined, 200],
    ];
    for (const [method, path, key, body, status] of cases) {
      const r = await stack.client.call(method, path, { ...(key !== undefined ? { key } : {}), ...(body !== undefined ? { body } : {}) });
      expect(r.status, `${method} ${path}: ${r.text}`).to.equal(status);
      expect([...checkResponse(r), ...openApiProblems(r)]).to.deep.equal([]);
    }
    const statuses: number[] = [];
    for (let i = 0; i < 6; i += 1) statuses.push((await stack.client.call('GET', `/v1/organisations/${a.id}`, { key: a.key })).status);
    expect(statuses).to.include(429);
    expect(logger.entries.filter((e) => e.level === 'error')).to.deep.equal([]);
  });
});
