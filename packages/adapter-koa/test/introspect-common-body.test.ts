/**
 * C-273: the introspection's common JSON body (`{"token":"…"}`, with or without `count`, as
 * JSON.stringify writes it) is read without JSON.parse. Whatever it reads must be exactly what
 * JSON.parse gives for the same bytes, and anything else is left to JSON.parse (null).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { commonJsonBody } from '../src/routes/introspect.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** JSON.parse of the bytes, or undefined when they are not UTF-8 JSON. */
function parsed(bytes: Buffer): unknown {
  try {
    return JSON.parse(utf8.decode(bytes));
  } catch {
    return undefined;
  }
}

/** Printable ASCII other than `"` and `\`: a token the common body carries as it is. */
const plainToken = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).filter((c) => c !== 0x22 && c !== 0x5c).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 600 });

describe('C-273: the common introspection body, read without JSON.parse', () => {
  it('C-273: JSON.stringify of {token} or {token, count} with a plain token is read, exactly as JSON.parse reads it', () => {
    fc.assert(
      fc.property(plainToken, fc.option(fc.boolean(), { nil: undefined }), (token, count) => {
        const bytes = Buffer.from(JSON.stringify(count === undefined ? { token } : { token, count }));
        const read = commonJsonBody(bytes);
        expect(read).to.not.equal(null);
        expect(read).to.deep.equal(parsed(bytes));
      }),
      { numRuns: 2000 },
    );
  });

  it('C-273: any other bytes (near misses of the common body, other shapes, escapes, non-ASCII) are either left to JSON.parse or read as JSON.parse reads them', () => {
    const near = fc
      .record({ token: fc.oneof(plainToken, fc.string({ maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 40 })), count: fc.option(fc.oneof(fc.boolean(), fc.jsonValue({ maxDepth: 1 })), { nil: undefined }) })
      .map(({ token, count }) => JSON.stringify(count === undefined ? { token } : { token, count }));
    const mutated = fc.tuple(near, fc.nat(), fc.integer({ min: 0, max: 255 })).map(([text, at, byte]) => {
      const bytes = Buffer.from(text);
      bytes[at % bytes.length] = byte;
      return bytes;
    });
    const spaced = near.map((text) => Buffer.from(text.replace(':', ': ').replace(',', ' ,')));
    fc.assert(
      fc.property(fc.oneof(near.map((t) => Buffer.from(t)), mutated, spaced, fc.uint8Array({ maxLength: 80 }).map((a) => Buffer.from(a))), (bytes) => {
        const read = commonJsonBody(bytes);
        if (read !== null) expect(read).to.deep.equal(parsed(bytes));
      }),
      { numRuns: 2000 },
    );
    for (const text of ['{"token":""}', '{"token":"a\\"b"}', '{"token":"é"}', '{"token":"a","count":1}', '{"token":"a","count":true,"x":1}', '{"token":"a"} ', ' {"token":"a"}', '{"count":true,"token":"a"}']) {
      expect(commonJsonBody(Buffer.from(text)), text).to.equal(null);
    }
  });
});
