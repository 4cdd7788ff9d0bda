import type { Organisation } from '../domain/organisation.js';
import { unwrap } from '../validation/issues.js';
import { checkCreateOrganisation } from '../validation/organisation.js';
import type { CoreDeps } from '../deps.js';
import { issueKeyIn, type IssuedKey } from './api-keys.js';
import { createOrganisationIn } from './organisations.js';
import { actorOf } from '../access/authorise.js';
import { OPERATOR, type OperatorPrincipal } from '../domain/principal.js';

export type BootstrapResult =
  | { readonly created: true; readonly organisation: Organisation; readonly issued: IssuedKey }
  | { readonly created: false; readonly organisation: Organisation };

const BOOTSTRAP_DEFAULTS = Object.freeze({ name: 'Platform', slug: 'platform', label: 'bootstrap' });

/**
 * `cos-admin bootstrap`: when no system organisation exists, create one (default name "Platform",
 * slug "platform") and issue a platform key (label "bootstrap"), in one unit of work; otherwise
 * report the existing one and issue nothing.
 */
export class Bootstrap {
  constructor(private readonly deps: CoreDeps) {}

  /** `operator`: who runs it, recorded as the actor of both audit entries (default: the unnamed operator). */
  async run(options?: { readonly name?: string; readonly slug?: string; readonly operator?: OperatorPrincipal }): Promise<BootstrapResult> {
    const input = unwrap(
      checkCreateOrganisation({ name: options?.name ?? BOOTSTRAP_DEFAULTS.name, slug: options?.slug ?? BOOTSTRAP_DEFAULTS.slug }),
    );
    return this.deps.unitOfWork.run(async (stores): Promise<BootstrapResult> => {
      const existing = await stores.organisations.findFirstSystem();
      if (existing !== null) return { created: false, organisation: existing };
      const now = this.deps.clock.now();
      const actor = actorOf(options?.operator ?? OPERATOR);
      const organisation = await createOrganisationIn(stores, this.deps, input, true, actor, now);
      const issued = await issueKeyIn(
        stores,
        this.deps,
        organisation.id,
        { label: BOOTSTRAP_DEFAULTS.label, expiresAt: null, environment: 'live' },
        actor,
        now,
      );
      return { created: true, organisation, issued };
    });
  }
}
