/** One seed per run, printed so that `FUZZ_SEED=<seed>` replays exactly the same cases. */
import { intFromEnv } from './env.js';

const fromEnv = process.env.FUZZ_SEED;
export const FUZZ_SEED: number =
  fromEnv !== undefined && fromEnv !== '' ? Number.parseInt(fromEnv, 10) : (Date.now() ^ (process.pid << 8)) >>> 0;
if (!Number.isInteger(FUZZ_SEED)) throw new Error(`FUZZ_SEED must be an integer, got ${String(fromEnv)}`);

/** Scales every fuzz suite's case count (FUZZ_SCALE=10 for a long local run). */
export const FUZZ_SCALE = intFromEnv('FUZZ_SCALE', 1);

let printed = false;
export function announceSeed(): void {
  if (printed) return;
  printed = true;
  console.log(`      fuzz seed ${FUZZ_SEED} (replay with FUZZ_SEED=${FUZZ_SEED})`);
}

/** fast-check parameters for one property: seeded, fixed count, minimal shrinking time. */
export function fuzzParameters(numRuns: number, offset: number) {
  return {
    seed: (FUZZ_SEED + offset) | 0,
    numRuns: numRuns * FUZZ_SCALE,
    // Shrinking replays requests against a live, stateful service; keep it short but useful.
    maxSkipsPerRun: 10,
    verbose: 1 as const,
  };
}
