/** The packages `tsc -b packages/cli` builds. */
export declare const PACKAGES: readonly string[];
/** Why `pnpm cos-admin` must build first (the first package out of date), or null when every build is current. */
export declare function staleness(root: string, packages?: readonly string[]): string | null;
