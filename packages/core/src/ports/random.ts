/** Source of randomness. The default is node:crypto (a CSPRNG); tests may inject a seeded fake. */
export interface Random {
  /** `n` random bytes. */
  bytes(n: number): Uint8Array;
  /** A random (v4) UUID. */
  uuid(): string;
}
