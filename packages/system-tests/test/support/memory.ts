/**
 * Memory sampling for the soak: heap after a full garbage collection (the live set), and RSS.
 * `gc` is exposed at run time when the process was not started with --expose-gc.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let gcFn: (() => void) | undefined;

export function fullGc(): void {
  if (gcFn === undefined) {
    const existing = (globalThis as { gc?: () => void }).gc;
    if (typeof existing === 'function') gcFn = existing;
    else {
      setFlagsFromString('--expose-gc');
      gcFn = runInNewContext('gc') as () => void;
    }
  }
  gcFn();
}

export interface MemorySample {
  readonly at: number;
  readonly heapUsed: number;
  readonly rss: number;
}

export function sampleMemory(at: number): MemorySample {
  fullGc();
  const m = process.memoryUsage();
  return { at, heapUsed: m.heapUsed, rss: m.rss };
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}
