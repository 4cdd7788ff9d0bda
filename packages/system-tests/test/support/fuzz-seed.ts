/** One seed per run, printed so that `FUZZ_SEED=<seed>` replays exactly the same cases. */
import { IN_CI } from './env.js';

const fromEnv = process.env.FUZZ_SEED;
export const FUZZ_SEED: number =
  fromEnv !== undefined && fromEnv !== '' ? Number.parseInt(fromEnv, 10) : (Date.now() ^ (process.pid << 8)) >>> 0;
if (!Number.isInteger(FUZZ_SEED)) throw new Error(`FUZZ_SEED must be an integer, got ${String(fromEnv)}`);

/**
 * Scales every fuzz suite's case count: FUZZ_SCALE=<n> (a positive number, e.g. 10 for a long local
 * run). Default: the full counts under CI=true, a quarter of them in a local run (the README's
 * `test`), where the fuzz was the largest single share of the suite's CPU time; every property, the
 * status-coverage check and the seed stay the same, only fewer cases are drawn.
 */
export const FUZZ_SCALE = scaleFromEnv(process.env.FUZZ_SCALE, IN_CI ? 1 : 0.25);

function scaleFromEnv(raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`FUZZ_SCALE must be a positive number, got ${JSON.stringify(raw)}`);
  return n;
}

let printed = false;
export function announceSeed(): void {
  if (printed) return;
  printed = true;
  console.log(`      fuzz seed ${FUZZ_SEED} (replay with FUZZ_SEED=${FUZZ_SEED})`);
}

/** A property's case count under FUZZ_SCALE (at least one). */
export function scaledRuns(numRuns: number): number {
  return Math.max(1, Math.round(numRuns * FUZZ_SCALE));
}

/** fast-check parameters for one property: seeded, fixed count, minimal shrinking time. */
export function fuzzParameters(numRuns: number, offset: number) {
  return {
    seed: (FUZZ_SEED + offset) | 0,
    numRuns: scaledRuns(numRuns),
    // Shrinking replays requests against a live, stateful service; keep it short but useful.
    maxSkipsPerRun: 10,
    verbose: 1 as const,
  };
}
