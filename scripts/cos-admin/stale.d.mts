/** The packages `tsc -b packages/cli` builds. */
export declare const PACKAGES: readonly string[];
/** Why `pnpm cos-admin` must build first (the first package out of date), or null when every build is current. */
export declare function staleness(root: string, packages?: readonly string[]): string | null;
/** After a successful `tsc -b`: records every package's build as current (tsc leaves an up-to-date package's tsbuildinfo untouched). */
export declare function markBuilt(root: string, packages?: readonly string[]): void;
