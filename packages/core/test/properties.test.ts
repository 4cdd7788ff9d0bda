/** Property tests (fast-check) of core's pure domain code and of the in-memory store's paging. */
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import {
  cryptoRandom,
  decide,
  decodeCursor,
  digestKey,
  digestsEqual,
  encodeCursor,
  failOpen,
  generateRawKey,
  isoTimestamp,
  isWellFormedKey,
  NACE_SECTIONS,
  organisationJson,
  organisationView,
  KEY_ALPHABET,
  KEY_PATTERN,
  KEY_PREFIXES,
  keyPrefixOf,
  keyStatus,
  retryAfterSeconds,
  ValidationError,
  WINDOW_MS,
  windowAt,
  type KeyEnvironment,
  type KeysetPosition,
  type NaceSection,
  type Organisation,
  type Random,
} from '@cos/core';
import { createInMemoryStore, seededRandom } from '@cos/core/testing';

const environment = fc.constantFrom<KeyEnvironment>('live', 'test');
/** Epoch milliseconds from 1970 to 2200. */
const epochMs = fc.integer({ min: 0, max: 7_258_118_400_000 });
const nullableDate = fc.option(epochMs.map((ms) => new Date(ms)), { nil: null });

/** A Random that serves the given byte stream, then (when it runs dry) bytes of a seeded stream. */
function streamRandom(stream: readonly number[], fallbackSeed = 1): Random & { served: number[] } {
  let offset = 0;
  const fallback = seededRandom(fallbackSeed);
  const served: number[] = [];
  return {
    served,
    bytes(n: number) {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) {
        out[i] = offset < stream.length ? stream[offset++]! : fallback.bytes(1)[0]!;
      }
      served.push(...out);
      return out;
    },
    uuid: () => fallback.uuid(),
  };
}

/** The model of C-30: bytes below 248 map to ALPHABET[b % 62]; the rest are skipped. */
function modelKey(env: KeyEnvironment, bytes: readonly number[]): string {
  const chars = bytes.filter((b) => b < 248).map((b) => KEY_ALPHABET[b % 62]);
  return KEY_PREFIXES[env] + chars.slice(0, 48).join('');
}

describe('properties: API keys (C-30, C-31, C-36)', () => {
  it('C-30: every generated key matches ^svc_(live|test)_[A-Za-z0-9]{48}$ and its prefix is its first 12 characters', () => {
    fc.assert(
      fc.property(environment, fc.integer(), (env, seed) => {
        const key = generateRawKey(env, seededRandom(seed));
        expect(key).to.match(KEY_PATTERN);
        expect(key).to.have.length(57);
        expect(key.startsWith(KEY_PREFIXES[env])).to.equal(true);
        expect(isWellFormedKey(key)).to.equal(true);
        expect(keyPrefixOf(key)).to.equal(key.slice(0, 12));
      }),
      { numRuns: 500 },
    );
  });

  it('C-30: for any byte stream, the key is exactly the rejection-sampling model of it', () => {
    fc.assert(
      fc.property(environment, fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 300 }), fc.integer(), (env, stream, seed) => {
        const random = streamRandom(stream, seed);
        const key = generateRawKey(env, random);
        expect(key).to.match(KEY_PATTERN);
        expect(key).to.equal(modelKey(env, random.served));
      }),
      { numRuns: 500 },
    );
  });

  it('C-30: runs of bytes >= 248 (however long) are skipped, and the key equals the one the clean stream gives', () => {
    fc.assert(
      fc.property(
        environment,
        fc.array(fc.integer({ min: 248, max: 255 }), { minLength: 1, maxLength: 400 }),
        fc.integer(),
        (env, rejected, seed) => {
          const clean = generateRawKey(env, streamRandom([], seed));
          const noisy = generateRawKey(env, streamRandom(rejected, seed));
          expect(noisy).to.equal(clean);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('C-30: over many keys every one of the 62 characters occurs, with no modulo bias (chi-square)', () => {
    const counts = new Map<string, number>([...KEY_ALPHABET].map((c) => [c, 0]));
    const random = seededRandom(20260610);
    const KEYS = 3000;
    for (let i = 0; i < KEYS; i++) {
      for (const c of generateRawKey(i % 2 === 0 ? 'live' : 'test', random).slice(9)) counts.set(c, counts.get(c)! + 1);
    }
    expect(counts.size).to.equal(62);
    const expected = (KEYS * 48) / 62;
    for (const [c, n] of counts) expect(n, `character ${c}`).to.be.greaterThan(0);
    const chi = [...counts.values()].reduce((sum, n) => sum + (n - expected) ** 2 / expected, 0);
    // 61 degrees of freedom: p = 0.001 at about 100.9. Plain `b % 62` would put A..H about 25% high (chi in the thousands).
    expect(chi).to.be.below(100.9);
  });

  it('C-30: the CSPRNG default also covers all 62 characters', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 400 && seen.size < 62; i++) for (const c of generateRawKey('live', cryptoRandom).slice(9)) seen.add(c);
    expect(seen.size).to.equal(62);
  });

  it('C-31: digestKey is the lower-case hex SHA-256 of any string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 80 }), (raw) => {
        const d = digestKey(raw);
        expect(d).to.match(/^[0-9a-f]{64}$/);
        expect(d).to.equal(createHash('sha256').update(raw, 'utf8').digest('hex'));
        expect(digestKey(raw)).to.equal(d);
      }),
      { numRuns: 300 },
    );
  });

  it('C-31: digestsEqual(digest(a), digest(b)) holds exactly when a equals b', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), fc.string({ maxLength: 60 }), (a, b) => {
        expect(digestsEqual(digestKey(a), digestKey(b))).to.equal(a === b);
        expect(digestsEqual(digestKey(a), digestKey(a))).to.equal(true);
      }),
      { numRuns: 300 },
    );
  });

  it('C-31: digestsEqual answers as comparing the Buffer.from(hex) bytes of both, for any strings (scratch buffers and the long path)', () => {
    const reference = (a: string, b: string): boolean => {
      const ba = Buffer.from(a, 'hex');
      const bb = Buffer.from(b, 'hex');
      return ba.length === bb.length && ba.length > 0 && ba.equals(bb);
    };
    const hexish = fc.oneof(fc.stringMatching(/^[0-9a-fA-F]{0,140}$/), fc.string({ maxLength: 140 }));
    fc.assert(
      fc.property(hexish, hexish, (a, b) => {
        expect(digestsEqual(a, b)).to.equal(reference(a, b));
        expect(digestsEqual(a, a)).to.equal(reference(a, a));
        // A longer digest compared after a shorter one: no byte of the earlier call is left over.
        expect(digestsEqual(`${a}00`, `${a}00`)).to.equal(reference(`${a}00`, `${a}00`));
      }),
      { numRuns: 500 },
    );
  });

  it('C-36: keyStatus: revoked whenever revokedAt is set; else expired iff expiresAt <= now; else active', () => {
    fc.assert(
      fc.property(nullableDate, nullableDate, epochMs, (revokedAt, expiresAt, nowMs) => {
        const now = new Date(nowMs);
        const status = keyStatus({ revokedAt, expiresAt }, now);
        const expected =
          revokedAt !== null ? 'revoked' : expiresAt !== null && expiresAt.getTime() <= nowMs ? 'expired' : 'active';
        expect(status).to.equal(expected);
      }),
      { numRuns: 500 },
    );
  });
});

describe('properties: rate windows (C-50..C-54)', () => {
  const limit = fc.integer({ min: 1, max: 100_000 });

  it('C-50: the window is the UTC minute holding now: starts at second :00.000, lasts 60 s', () => {
    fc.assert(
      fc.property(epochMs, (nowMs) => {
        const w = windowAt(nowMs);
        expect(w.startMs).to.be.at.most(nowMs);
        expect(nowMs).to.be.below(w.endMs);
        expect(w.endMs - w.startMs).to.equal(WINDOW_MS);
        const start = new Date(w.startMs);
        expect(start.getUTCSeconds()).to.equal(0);
        expect(start.getUTCMilliseconds()).to.equal(0);
        expect(windowAt(w.startMs)).to.deep.equal(w);
        expect(windowAt(w.endMs - 1)).to.deep.equal(w);
        expect(windowAt(w.endMs).startMs).to.equal(w.endMs);
      }),
      { numRuns: 1000 },
    );
  });

  it('C-51, C-52: remaining = max(0, limit - count) >= 0; allowed iff count <= limit; reset is the end of the minute in epoch seconds', () => {
    fc.assert(
      fc.property(epochMs, limit, fc.integer({ min: 1, max: 200_000 }), (nowMs, max, count) => {
        const w = windowAt(nowMs);
        const d = decide(count, max, w, nowMs);
        expect(d.limit).to.equal(max);
        expect(d.remaining).to.equal(Math.max(0, max - count));
        expect(d.remaining).to.be.at.least(0);
        expect(d.allowed).to.equal(count <= max);
        expect(d.degraded).to.equal(false);
        expect(Number.isInteger(d.resetEpochSeconds)).to.equal(true);
        expect(d.resetEpochSeconds * 1000).to.equal(w.endMs);
      }),
      { numRuns: 1000 },
    );
  });

  it('C-51: request limit+1 is refused, request limit is not; in one window exactly `limit` requests pass', () => {
    fc.assert(
      fc.property(epochMs, fc.integer({ min: 1, max: 300 }), fc.integer({ min: 0, max: 400 }), (nowMs, max, requests) => {
        const w = windowAt(nowMs);
        expect(decide(max, max, w, nowMs).allowed).to.equal(true);
        expect(decide(max + 1, max, w, nowMs).allowed).to.equal(false);
        let passed = 0;
        for (let count = 1; count <= requests; count++) if (decide(count, max, w, nowMs).allowed) passed += 1;
        expect(passed).to.equal(Math.min(requests, max));
      }),
      { numRuns: 200 },
    );
  });

  it('C-52: 1 <= Retry-After <= 60, and waiting that long reaches the next window', () => {
    fc.assert(
      fc.property(epochMs, (nowMs) => {
        const w = windowAt(nowMs);
        const s = retryAfterSeconds(w, nowMs);
        expect(Number.isInteger(s)).to.equal(true);
        expect(s).to.be.within(1, 60);
        expect(nowMs + s * 1000).to.be.at.least(w.endMs);
        expect(nowMs + (s - 1) * 1000, 'no longer than needed').to.be.below(w.endMs);
        expect(decide(1, 60, w, nowMs).retryAfterSeconds).to.equal(s);
      }),
      { numRuns: 1000 },
    );
  });

  it('C-54: fail-open always allows and shows Remaining equal to the limit, with the same window headers', () => {
    fc.assert(
      fc.property(epochMs, limit, (nowMs, max) => {
        const w = windowAt(nowMs);
        const d = failOpen(max, w, nowMs);
        expect(d).to.deep.equal({
          allowed: true,
          limit: max,
          remaining: max,
          resetEpochSeconds: w.endMs / 1000,
          retryAfterSeconds: retryAfterSeconds(w, nowMs),
          degraded: true,
        });
      }),
      { numRuns: 500 },
    );
  });
});

describe('properties: cursors (C-6)', () => {
  const position = fc.record({
    createdAt: fc.date({ noInvalidDate: true }),
    // Every record id is a lower-case UUID; a cursor carrying anything else does not decode (C-6).
    id: fc.uuid().map((u) => u.toLowerCase()),
  });

  it('C-6: decodeCursor(encodeCursor(p)) is p, for any valid date and id', () => {
    fc.assert(
      fc.property(position, (p) => {
        const cursor = encodeCursor(p);
        expect(cursor).to.match(/^[A-Za-z0-9_-]+$/);
        const back = decodeCursor(cursor);
        expect(back.createdAt.getTime()).to.equal(p.createdAt.getTime());
        expect(back.id).to.equal(p.id);
      }),
      { numRuns: 1000 },
    );
  });

  it('C-6: distinct positions give distinct cursors', () => {
    fc.assert(
      fc.property(position, position, (a, b) => {
        const same = a.createdAt.getTime() === b.createdAt.getTime() && a.id === b.id;
        expect(encodeCursor(a) === encodeCursor(b)).to.equal(same);
      }),
      { numRuns: 500 },
    );
  });

  /** Either a ValidationError on field "cursor", or a well-formed position. Never any other outcome. */
  function decodesOrRejectsCleanly(cursor: string): void {
    let decoded: KeysetPosition;
    try {
      decoded = decodeCursor(cursor);
    } catch (error) {
      expect(error).to.be.instanceOf(ValidationError);
      expect((error as ValidationError).details).to.deep.equal([{ field: 'cursor', issue: (error as ValidationError).details[0]!.issue }]);
      return;
    }
    expect(decoded.createdAt).to.be.instanceOf(Date);
    expect(Number.isNaN(decoded.createdAt.getTime())).to.equal(false);
    expect(decoded.id).to.be.a('string');
    expect(decoded.id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(encodeCursor(decoded).length).to.be.at.most(512);
  }

  it('C-6: arbitrary strings never decode into anything but a valid position or a "cursor" ValidationError', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary', maxLength: 600 }), fc.base64String({ maxLength: 120 })), decodesOrRejectsCleanly),
      { numRuns: 1000 },
    );
  });

  it('C-6: base64url of arbitrary JSON never decodes into anything but a valid position or a "cursor" ValidationError', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.jsonValue(),
          fc.tuple(fc.jsonValue(), fc.jsonValue()),
          fc.tuple(fc.date({ noInvalidDate: true }).map((d) => d.toISOString()), fc.jsonValue()),
        ),
        (value) => decodesOrRejectsCleanly(Buffer.from(JSON.stringify(value) ?? 'null', 'utf8').toString('base64url')),
      ),
      { numRuns: 1000 },
    );
  });
});

describe('properties: in-memory store paging (C-6, C-7)', () => {
  it('C-6, C-7: for any records and page size, following pages lists each record once, in (createdAt, id) order', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.record({ offset: fc.integer({ min: 0, max: 5 }), id: fc.uuid() }), {
          selector: (r) => r.id,
          maxLength: 25,
        }),
        fc.integer({ min: 1, max: 8 }),
        async (records, limit) => {
          const store = createInMemoryStore();
          const base = Date.UTC(2026, 0, 1);
          for (const r of records) {
            const createdAt = new Date(base + r.offset);
            await store.stores.organisations.create({
              id: r.id,
              name: r.id,
              slug: `o-${r.id}`,
              industrySection: null,
              isSystem: false,
              rateLimitPerMinute: null,
              createdAt,
              updatedAt: createdAt,
            });
          }
          const expected = [...records]
            .sort((a, b) => a.offset - b.offset || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
            .map((r) => r.id);
          const seen: string[] = [];
          let after: KeysetPosition | null = null;
          for (let pages = 0; pages <= records.length + 1; pages++) {
            const page = await store.stores.organisations.list({ limit, after });
            expect(page.length).to.be.at.most(limit);
            seen.push(...page.map((o) => o.id));
            if (page.length < limit) break;
            const last = page[page.length - 1]!;
            after = { createdAt: last.createdAt, id: last.id };
          }
          expect(seen).to.deep.equal(expected);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('properties: timestamps in views (C-20)', () => {
  it('C-20: isoTimestamp(d) is exactly d.toISOString() for every date, inside and outside years 1000-9999', () => {
    fc.assert(
      fc.property(fc.date({ noInvalidDate: true }), (d) => {
        expect(isoTimestamp(d)).to.equal(d.toISOString());
      }),
      { numRuns: 5000 },
    );
    for (const ms of [0, -1, Date.UTC(999, 11, 31, 23, 59, 59, 999), Date.UTC(1000, 0, 1), Date.UTC(9999, 11, 31, 23, 59, 59, 999), Date.UTC(10000, 0, 1), 8.64e15, -8.64e15]) {
      expect(isoTimestamp(new Date(ms)), String(ms)).to.equal(new Date(ms).toISOString());
    }
  });

  it('C-20: an invalid date throws as toISOString does (a view never shows "Invalid Date")', () => {
    expect(() => isoTimestamp(new Date(Number.NaN))).to.throw(RangeError);
  });
});

describe('properties: the organisation body (C-20)', () => {
  it('C-20: organisationJson(o) is exactly JSON.stringify(organisationView(o)), for any strings (quotes, escapes, unicode, lone surrogates) and dates', () => {
    const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('"', '\\', '\u2028', '\ud800', 'a"b\\c\n\u0000'));
    const organisation: fc.Arbitrary<Organisation> = fc.record({
      id: fc.oneof(fc.uuid(), text),
      name: text,
      slug: text,
      industrySection: fc.option(fc.constantFrom(...(Object.keys(NACE_SECTIONS) as NaceSection[])), { nil: null }),
      isSystem: fc.boolean(),
      rateLimitPerMinute: fc.option(fc.integer({ min: 1, max: 1_000_000 }), { nil: null }),
      createdAt: fc.date({ noInvalidDate: true }),
      updatedAt: fc.date({ noInvalidDate: true }),
    });
    fc.assert(
      fc.property(organisation, (o) => {
        expect(organisationJson(o)).to.equal(JSON.stringify(organisationView(o)));
      }),
      { numRuns: 5000 },
    );
  });
});
