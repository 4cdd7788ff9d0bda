import type { Random } from '../ports/random.js';

/**
 * A deterministic Random for tests: the same seed gives the same bytes and UUIDs (v4-shaped:
 * version nibble 4, variant bits 10). NOT a CSPRNG: tests only.
 */
export function seededRandom(seed: number): Random {
  // sfc32 seeded through splitmix32, so nearby seeds give unrelated streams.
  let s = seed >>> 0;
  const splitmix = (): number => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
  let a = splitmix();
  let b = splitmix();
  let c = splitmix();
  let d = splitmix();
  const next32 = (): number => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = ((c << 21) | (c >>> 11)) >>> 0;
    c = (c + t) >>> 0;
    return t;
  };
  for (let i = 0; i < 12; i++) next32();

  const bytes = (n: number): Uint8Array => {
    if (!Number.isInteger(n) || n < 0) throw new RangeError(`seededRandom: invalid byte count ${n}`);
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i += 4) {
      const word = next32();
      for (let j = 0; j < 4 && i + j < n; j++) out[i + j] = (word >>> (8 * j)) & 0xff;
    }
    return out;
  };

  const uuid = (): string => {
    const b = bytes(16);
    b[6] = (b[6]! & 0x0f) | 0x40;
    b[8] = (b[8]! & 0x3f) | 0x80;
    const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  };

  return { bytes, uuid };
}
