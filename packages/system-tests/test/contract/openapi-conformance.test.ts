/**
 * docs/openapi.yaml is part of the public surface: what the live service answers must validate
 * against it. The fuzz suite checks every random response; these are the specific cases the fuzz
 * found, kept as named regressions.
 */
import { expect } from 'chai';
import { startStack, type Stack } from '../support/stack.js';
import { createCast, type Cast } from '../support/fixture.js';
import { checkResponse } from '../support/shapes.js';
import { openApiAvailable, openApiProblems, OPENAPI_PATH } from '../support/openapi.js';

describe('system: docs/openapi.yaml describes what the service answers', function () {
  let stack: Stack;
  let cast: Cast;

  before(async () => {
    stack = await startStack();
    cast = await createCast(stack.core, { spares: 1, expiringMs: 1 });
  });
  after(async () => {
    await stack?.close();
  });

  it('docs/openapi.yaml exists and loads', () => {
    expect(openApiAvailable(), OPENAPI_PATH).to.equal(true);
  });

  it('C-11: an unknown field named "" is reported as {field:"", issue:"extra fields not permitted"}, and the documented ErrorDetail allows that empty field name', async () => {
    const r = await stack.client.call('POST', `/v1/organisations/${cast.own.id}/api-keys`, { key: cast.own.key, body: '{"label":"x","":1}' });
    expect(r.status).to.equal(400);
    expect(r.json<{ details: unknown[] }>().details).to.deep.include({ field: '', issue: 'extra fields not permitted' });
    expect(checkResponse(r)).to.deep.equal([]);
    expect(openApiProblems(r)).to.deep.equal([]);
  });
});
