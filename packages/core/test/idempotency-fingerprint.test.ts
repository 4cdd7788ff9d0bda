/**
 * The Idempotency-Key fingerprint (operations/idempotency.ts): the calling key, the method, the
 * path and the body as canonical JSON (object keys sorted), computed without recursion.
 */
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import { requestFingerprint } from '@cos/core';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** The canonical form written the obvious way, by recursion: the reference for shallow values. */
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${reference(record[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** `levels` objects and arrays nested in one another, as JSON.parse would give them. */
function nested(levels: number): unknown {
  let value: unknown = 'bottom';
  for (let i = 0; i < levels; i++) value = i % 2 === 0 ? [value] : { level: value };
  return value;
}

describe('core: the Idempotency-Key request fingerprint (C-131, C-132)', () => {
  it('is SHA-256 over the calling key id, the method upper-cased, the path and the body as JSON with sorted keys', () => {
    const body = { b: 1, a: [1, { d: null, c: 'x"é' }], '': true };
    expect(requestFingerprint('key-1', { method: 'post', path: '/v1/organisations?x=1', body })).to.equal(
      sha256('key-1\nPOST\n/v1/organisations?x=1\n{"":true,"a":[1,{"c":"x\\"é","d":null}],"b":1}'),
    );
    expect(requestFingerprint('key-1', { method: 'DELETE', path: '/v1/x', body: undefined })).to.equal(sha256('key-1\nDELETE\n/v1/x\n'));
  });

  it('C-131: another calling key is another request', () => {
    const request = { method: 'POST', path: '/v1/organisations', body: { name: 'x' } };
    expect(requestFingerprint('key-1', request)).to.not.equal(requestFingerprint('key-2', request));
  });

  it('matches the recursive canonical form for any JSON value, and ignores the order of object keys', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (value, other) => {
        const fingerprint = requestFingerprint('k', { method: 'PUT', path: '/p', body: value });
        expect(fingerprint).to.equal(sha256(`k\nPUT\n/p\n${reference(value)}`));
        const reordered = JSON.parse(JSON.stringify(value), (_key, v: unknown) =>
          v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v as object).reverse()) : v,
        ) as unknown;
        expect(requestFingerprint('k', { method: 'PUT', path: '/p', body: reordered })).to.equal(fingerprint);
        if (reference(other) !== reference(value)) expect(requestFingerprint('k', { method: 'PUT', path: '/p', body: other })).to.not.equal(fingerprint);
      }),
      { numRuns: 300 },
    );
  });

  it('C-132: a body nested 200 000 levels deep is fingerprinted without exhausting the call stack', () => {
    const deep = nested(200_000);
    expect(() => reference(deep), 'the recursive form cannot').to.throw(RangeError);
    expect(requestFingerprint('k', { method: 'POST', path: '/p', body: deep })).to.match(/^[0-9a-f]{64}$/);
    expect(requestFingerprint('k', { method: 'POST', path: '/p', body: nested(200_000) })).to.equal(requestFingerprint('k', { method: 'POST', path: '/p', body: deep }));
  });
});
