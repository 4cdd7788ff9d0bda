// Blocks of operations taken in turns within one process, for differences smaller than what two
// separate runs resolve on a busy machine: each side runs `size` operations, then the next side,
// the order reversed every other round; the CPU time of the process is taken per block. The figure
// to read is the median of the per-block ratios: whatever else the machine does weighs on
// neighbouring blocks alike.
import { median } from './alternate.mjs';

/**
 * sides: [{ one(i) }] (`one` may return a promise; it is awaited only then). Fills each side's
 * `cpuUs` and `sysUs` (CPU and system CPU µs per operation, one entry per block); `i` counts each
 * side's operations from `start`.
 */
export async function runPairedBlocks(sides, { blocks, size, start = 0 }) {
  for (const side of sides) {
    side.cpuUs = [];
    side.sysUs = [];
    side.next = start;
  }
  for (let b = 0; b < blocks; b++) {
    for (const side of b % 2 === 0 ? sides : [...sides].reverse()) {
      const cpu0 = process.cpuUsage();
      for (let i = 0; i < size; i++) {
        const pending = side.one(side.next++);
        if (pending instanceof Promise) await pending;
      }
      const cpu = process.cpuUsage(cpu0);
      side.cpuUs.push((cpu.user + cpu.system) / size);
      side.sysUs.push(cpu.system / size);
    }
  }
}

/** A side's median CPU µs per operation, system µs, and the median of its per-block ratios to `first`. */
export function pairedFigures(side, first) {
  return {
    cpuUs: median(side.cpuUs),
    sysUs: median(side.sysUs),
    ratio: median(side.cpuUs.map((v, i) => v / first.cpuUs[i])),
  };
}
