/**
 * Source of randomness: the bytes of keys, signing secrets and IVs, and record ids. The domain
 * draws on it and names what it needs here; the Random port (ports/random.ts) is this interface, and
 * the composition root injects it (node:crypto, a CSPRNG, by default; tests may inject a seeded fake).
 */
export interface Random {
  /** `n` random bytes. */
  bytes(n: number): Uint8Array;
  /** A random (v4) UUID. */
  uuid(): string;
}
