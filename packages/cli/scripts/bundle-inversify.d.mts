/** packages/cli, whose dependency `inversify` is bundled. */
export declare const CLI_DIR: string;
/** The bundle, relative to the cli's directory: dist/vendor/inversify.js. */
export declare const BUNDLE: string;
/** `name@version` of inversify as installed for the cli and of every package it depends on, sorted. */
export declare function installedPackages(cliDir?: string): string[];
/** Why the bundle must be made (again), or null when it is current. */
export declare function bundleStaleness(cliDir?: string): string | null;
/** Bundles inversify into dist/vendor/inversify.js, with its licences and the stamp beside it. */
export declare function bundleInversify(cliDir?: string): Promise<{ bytes: number; packages: string[] }>;
