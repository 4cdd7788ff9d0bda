/**
 * Text as it can be stored and hashed (C-121, C-122): wellFormedText replaces lone surrogates as
 * String.prototype.toWellFormed does; storableText also replaces U+0000; both keep the length.
 */
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import { storableText, validateAddMember, validateCreateOrganisation, validateIssueKey, wellFormedStrings, wellFormedText } from '@cos/core';

/** Node's own (ES2024; the project's lib is ES2023). */
const toWellFormed = (s: string): string => (s as unknown as { toWellFormed(): string }).toWellFormed();

describe('core: well-formed and storable text (C-121, C-122)', () => {
  it('C-121: lone surrogates (high without low, low without high, at either end) become U+FFFD; pairs and other text stay', () => {
    expect(wellFormedText('a\ud800b')).to.equal('a\ufffdb');
    expect(wellFormedText('\udc00a')).to.equal('\ufffda');
    expect(wellFormedText('a\ud800')).to.equal('a\ufffd');
    expect(wellFormedText('\udc00\ud800')).to.equal('\ufffd\ufffd');
    expect(wellFormedText('\ud83d\ude00 ok')).to.equal('\ud83d\ude00 ok');
    expect(wellFormedText('\ud83d\ud83d\ude00')).to.equal('\ufffd\ud83d\ude00');
    expect(wellFormedText('plain\u0000')).to.equal('plain\u0000');
  });

  it('C-121: for any UTF-16 text, exactly what toWellFormed gives, and UTF-8 round-trips it unchanged (what a store writes)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        const w = wellFormedText(s);
        expect(w).to.equal(toWellFormed(s));
        expect(Buffer.from(w, 'utf8').toString('utf8')).to.equal(w);
        expect(createHash('sha256').update(w, 'utf8').digest('hex')).to.equal(createHash('sha256').update(Buffer.from(w, 'utf8')).digest('hex'));
      }),
    );
  });

  it('C-122: storableText also replaces U+0000, keeping the length', () => {
    expect(storableText('a\u0000\ud800')).to.equal('a\ufffd\ufffd');
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        const t = storableText(s);
        expect(t).to.have.length(s.length);
        expect(t).to.not.include('\u0000');
        expect(t).to.equal(toWellFormed(s).replaceAll('\u0000', '\ufffd'));
      }),
    );
  });

  it('C-121: wellFormedStrings mends every string of a value at any depth, in place and without recursion; keys stay', () => {
    const deep: Record<string, unknown> = { a: '\ud800' };
    let node = deep;
    for (let i = 0; i < 20_000; i++) node = (node.next = { s: ['x\udc00'] }) as Record<string, unknown>;
    expect(wellFormedStrings(deep)).to.equal(deep);
    expect(deep.a).to.equal('\ufffd');
    expect((node.s as string[])[0]).to.equal('x\ufffd');
    expect(wellFormedStrings({ 'k\ud800': 1 })).to.deep.equal({ 'k\ud800': 1 });
    expect(wellFormedStrings('\ud800')).to.equal('\ufffd');
  });

  it('C-121: the core\'s body checks give well-formed text to whoever calls them (an embedder without the HTTP adapter too)', () => {
    expect(validateCreateOrganisation({ name: 'Acme \ud800', slug: 'acme' })).to.deep.equal({ name: 'Acme \ufffd', slug: 'acme' });
    expect(validateIssueKey({ label: '\udc00 ci' }, new Date())).to.deep.include({ label: '\ufffd ci' });
    expect(validateAddMember({ email: 'a\ud800@example.org' })).to.deep.equal({ email: 'a\ufffd@example.org' });
  });
});
