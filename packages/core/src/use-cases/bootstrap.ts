import type { Organisation } from '../domain/organisation.js';
import type { CoreDeps } from './deps.js';
import type { IssuedKey } from './api-keys.js';

export type BootstrapResult =
  | { readonly created: true; readonly organisation: Organisation; readonly issued: IssuedKey }
  | { readonly created: false; readonly organisation: Organisation };

/**
 * `cos-admin bootstrap`: when no system organisation exists, create one (default name "Platform",
 * slug "platform") and issue a platform key (label "bootstrap"), in one unit of work; otherwise
 * report the existing one and issue nothing.
 */
export class Bootstrap {
  constructor(private readonly deps: CoreDeps) {}

  run(options?: { readonly name?: string; readonly slug?: string }): Promise<BootstrapResult> {
    throw new Error('TODO: implement');
  }
}
