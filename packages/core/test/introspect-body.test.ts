/**
 * The introspection body's common form (`{"token": …}`, with `count` or not) is read without the
 * schema; every other body goes through it (C-272). Both readings must agree: a body with
 * `token_type_hint` added, which the schema accepts and ignores, always takes the schema's reading,
 * so for any `token` and `count` the two must hand the admission the same input or refuse with the
 * same details.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { Introspection, OPERATOR, ValidationError, MAX_INTROSPECTED_TOKEN_LENGTH } from '@cos/core';

type Outcome = { token: string; count: boolean } | { details: unknown };

/** What the admission is asked (or the refusal) for `body`. */
async function outcome(body: unknown): Promise<Outcome> {
  let asked: { token: string; count: boolean } | null = null;
  const introspection = new Introspection({
    inspect: (token: string, count: boolean) => {
      asked = { token, count };
      return Promise.resolve({ active: false } as const);
    },
  });
  try {
    await introspection.introspect(OPERATOR, body);
  } catch (e) {
    if (e instanceof ValidationError) return { details: e.details };
    throw e;
  }
  if (asked === null) throw new Error('the admission was not asked');
  return asked;
}

const anyValue = fc.oneof(fc.string({ maxLength: 8 }), fc.boolean(), fc.integer(), fc.constant(null), fc.array(fc.integer(), { maxLength: 2 }), fc.object({ maxDepth: 1 }));
const tokenLike = fc.oneof(
  fc.string({ minLength: 0, maxLength: 20, unit: 'binary' }),
  fc.string({ minLength: MAX_INTROSPECTED_TOKEN_LENGTH - 1, maxLength: MAX_INTROSPECTED_TOKEN_LENGTH + 1 }),
  fc.constantFrom('\ud800', 'svc_live_\udc00x', 'a\ud83d\ude00'),
  anyValue,
);

describe('introspection body: the common form read without the schema (C-272)', () => {
  it('agrees with the schema for any token and count, present or absent', async () => {
    await fc.assert(
      fc.asyncProperty(fc.record({ token: tokenLike, count: fc.oneof(fc.boolean(), anyValue) }, { requiredKeys: [] }), async (body) => {
        const viaSchema = await outcome({ ...body, token_type_hint: 'access_token' });
        expect(await outcome(body)).to.deep.equal(viaSchema);
      }),
      { numRuns: 400 },
    );
  });

  it('takes the common form as the schema would: count defaults to false, the token made well-formed', async () => {
    expect(await outcome({ token: 'svc_live_x' })).to.deep.equal({ token: 'svc_live_x', count: false });
    expect(await outcome({ token: 'svc_live_x', count: true })).to.deep.equal({ token: 'svc_live_x', count: true });
    expect(await outcome({ token: 'a\ud800' })).to.deep.equal({ token: 'a\ufffd', count: false });
  });

  it('leaves every other body to the schema and its details', async () => {
    expect(await outcome({ token: 'x', extra: 1 })).to.deep.equal({ details: [{ field: 'extra', issue: 'extra fields not permitted' }] });
    expect(await outcome({ token: '' })).to.have.property('details');
    expect(await outcome({ token: 'x', count: 'true' })).to.have.property('details');
    expect(await outcome([])).to.have.property('details');
    expect(await outcome({ token: 'x', source_address: '203.0.113.9' })).to.deep.equal({ token: 'x', count: false });
  });
});
