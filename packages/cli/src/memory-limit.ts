/**
 * How much memory `serve`'s processes may use, and the V8 heap limit each worker gets from it.
 *
 * V8 sizes its heap from the machine's memory (up to 4 GiB on a large host) and, allowed that
 * much, lets garbage grow with the request rate before its first full collection: the resident
 * memory of a busy worker then follows the load, not the data it keeps. A heap limit makes V8
 * collect earlier. `serve` sets it on every worker it forks (`--max-old-space-size` in the
 * workers' execArgv), so the shipped start paths are bounded without the operator setting a flag.
 *
 * The budget (MEMORY_LIMIT_MB, else the cgroup limit of the container, else DEFAULT_MB_PER_WORKER
 * per worker plus the primary's reserve) is shared like this: the primary keeps PRIMARY_RESERVE_MB,
 * each worker gets an equal share of the rest, and its old space is that share less what a worker
 * holds outside the old space (WORKER_OUTSIDE_HEAP_MB: code, native buffers, the young generation).
 * docs/decisions/0015 has the measurements behind the numbers.
 */
import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { join } from 'node:path';

/** What the primary process itself holds: Node, the CLI's modules, the operations listener (measured 86-89 MiB resident). */
export const PRIMARY_RESERVE_MB = 96;
/** A worker's resident memory outside V8's old space under load: the binary's code, native memory, the young generation. */
export const WORKER_OUTSIDE_HEAP_MB = 64;
/** The budget per worker when neither MEMORY_LIMIT_MB nor a cgroup limit says otherwise. */
export const DEFAULT_MB_PER_WORKER = 192;
/** The smallest old space a worker is started with, whatever the budget (below it the service would spend its time collecting). */
export const MIN_OLD_SPACE_MB = 64;

type MemoryLimitSource = 'MEMORY_LIMIT_MB' | 'cgroup' | 'default';

export interface MemoryPlan {
  /** The budget of all processes together, in MiB. */
  readonly limitMb: number;
  readonly source: MemoryLimitSource;
  /** `--max-old-space-size` of each worker, in MiB. */
  readonly oldSpaceMb: number;
  /** True when the budget is smaller than the workers need at MIN_OLD_SPACE_MB (they get that anyway). */
  readonly belowMinimum: boolean;
}

/** Limits of this size or more mean "no limit" (cgroup v1 writes a huge number for unlimited). */
const UNLIMITED_BYTES = 2 ** 60;

/**
 * The memory limit of this process's cgroup in MiB (cgroup v2 `memory.max`, else v1
 * `memory/memory.limit_in_bytes`), or null when there is none, it cannot be read, or it is not
 * below the machine's memory.
 */
export function cgroupMemoryLimitMb(root = '/sys/fs/cgroup', machineBytes = totalmem()): number | null {
  for (const file of [join(root, 'memory.max'), join(root, 'memory', 'memory.limit_in_bytes')]) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8').trim();
    } catch {
      continue;
    }
    if (text === 'max') return null;
    if (!/^\d+$/.test(text)) continue;
    const bytes = Number(text);
    if (bytes >= UNLIMITED_BYTES || bytes >= machineBytes) return null;
    return Math.floor(bytes / 2 ** 20);
  }
  return null;
}

/** The budget and each worker's old space for `workers` workers. */
export function planMemory(options: { readonly configuredMb: number | null; readonly workers: number; readonly cgroupMb: number | null }): MemoryPlan {
  const { configuredMb, workers, cgroupMb } = options;
  const [limitMb, source]: [number, MemoryLimitSource] =
    configuredMb !== null ? [configuredMb, 'MEMORY_LIMIT_MB'] : cgroupMb !== null ? [cgroupMb, 'cgroup'] : [PRIMARY_RESERVE_MB + DEFAULT_MB_PER_WORKER * workers, 'default'];
  const share = Math.floor((limitMb - PRIMARY_RESERVE_MB) / workers) - WORKER_OUTSIDE_HEAP_MB;
  return { limitMb, source, oldSpaceMb: Math.max(MIN_OLD_SPACE_MB, share), belowMinimum: share < MIN_OLD_SPACE_MB };
}

/** The heap limit flag the operator already gave Node (NODE_OPTIONS or the command line), if any. */
export function operatorHeapFlag(execArgv: readonly string[], nodeOptions: string | undefined): string | null {
  const all = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)];
  return all.find((a) => /^--max[-_]old[-_]space[-_]size(=|$)/.test(a)) ?? null;
}
