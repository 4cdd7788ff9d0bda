/**
 * The production directory as the deploy:dir test builds and runs it. The Dockerfile test holds the
 * image's build stage to these same values, so the image and the tested directory cannot drift.
 */

/** The command that writes the directory (its one argument: the directory). */
export const DEPLOY_COMMAND = 'npx -y pnpm@10 deploy:dir';
/** Paths inside the directory. */
export const DEPLOY_BIN = 'bin/cos-admin';
export const DEPLOY_SBOM = 'sbom.cdx.json';
export const DEPLOY_LICENSE = 'LICENSE';
