/**
 * Leaked keys (spec §2 "Key format": both prefixes are registered with a secret-scanning programme,
 * so a key committed to a public repository is detected and its owner notified; C-36, C-58, C-59).
 *
 * The HTTP adapter has verified the alert's signature; this use case acts on its matches, one unit
 * of work each: a well-formed key whose digest is known is a true positive. The first report of a
 * (key, url) pair records `api_key_exposed` (type, url, source, never the token) with its
 * `api_key.exposed` webhook event, and an active key is revoked in the same unit of work with
 * `api_key_revoked` (actor: secret scanning) and its `api_key.revoked` event. A repeat of the same
 * key and url (a redelivered alert) changes nothing. Unknown or malformed tokens store nothing.
 *
 * Lineage (C-61, C-62, C-100, C-101): the entry and the event list `descendant_key_ids`, the active
 * keys the reported key issued or rolled, directly or transitively, in any organisation (a platform
 * key issues keys in other organisations). When the key policy of the organisation owning the
 * reported key is `revoke_key_and_descendants`, each of them is revoked in the same unit of work,
 * with its own `api_key_revoked` entry and `api_key.revoked` event (actor: secret scanning) in its
 * own organisation's audit chain and outbox.
 *
 * The unit of work declares every organisation whose credentials it changes (the credential fence
 * announces each before the transaction opens), so the lineage is read once before it to learn
 * them, and again inside it to act on. A key issued into another organisation in between (the
 * reading inside finds an organisation the declaration lacks) makes the unit of work end before it
 * writes anything and run again with that organisation declared too; after EXPOSURE_ATTEMPTS such
 * runs the match fails with 503, nothing written for it.
 */
import { digestKey, isWellFormedKey, keyStatus, type ApiKey } from '../domain/api-key.js';
import { UnavailableError } from '../domain/errors.js';
import type { KeyPolicy } from '../domain/key-policy.js';
import type { Stores } from '../ports/unit-of-work.js';
import { keyPolicyIn } from './api-keys.js';
import { activeDescendants } from './key-lineage.js';
import type { AuditActor, KeyExposure } from '../domain/audit.js';
import { tokenHash } from '../domain/secret-scanning.js';
import { checkAlert, type AlertMatch } from '../validation/secret-scanning.js';
import { unwrap } from '../validation/issues.js';
import { auditEntry } from './audit-entry.js';
import type { CoreDeps } from '../deps.js';
import { notifyKeyEvents } from './key-events.js';

/** One entry of the programme's feedback format (never the raw token). */
export interface AlertFeedback {
  readonly token_hash: string;
  readonly token_type: string;
  readonly label: 'true_positive' | 'false_positive';
}

/** What happened to one match, for the log line (no key material). */
export type AlertOutcome = 'revoked' | 'recorded' | 'repeat' | 'unknown';

export interface AlertReport {
  readonly feedback: AlertFeedback[];
  readonly outcomes: Readonly<Record<AlertOutcome, number>>;
}

const SECRET_SCANNING: AuditActor = Object.freeze({ type: 'secret_scanning' });

export class SecretScanning {
  constructor(private readonly deps: Pick<CoreDeps, 'stores' | 'unitOfWork' | 'clock' | 'random'>) {}

  /**
   * Acts on a verified alert body (`[{token, type, url?, source?}, …]`, 1..1000 matches; 400
   * otherwise, nothing changed). Resolves once every revocation has committed (C-36).
   */
  async report(body: unknown): Promise<AlertReport> {
    const matches = unwrap(checkAlert(body));
    const outcomes: Record<AlertOutcome, number> = { revoked: 0, recorded: 0, repeat: 0, unknown: 0 };
    const feedback: AlertFeedback[] = [];
    for (const match of matches) {
      const outcome = await this.handle(match);
      outcomes[outcome] += 1;
      feedback.push({
        token_hash: tokenHash(match.token),
        token_type: match.type,
        label: outcome === 'unknown' ? 'false_positive' : 'true_positive',
      });
    }
    return { feedback, outcomes };
  }

  private async handle(match: AlertMatch): Promise<AlertOutcome> {
    if (!isWellFormedKey(match.token)) return 'unknown';
    const found = await this.deps.stores.apiKeys.findCredential(digestKey(match.token));
    if (found === null) return 'unknown';
    const { organisationId, id } = found.key;
    const exposure: KeyExposure = { type: match.type, url: match.url, source: match.source };
    // The organisations this exposure changes, as read before its unit of work: the key's own while
    // it is active (keys never become active again: a dead key's report needs no fence of its own),
    // and those of its active descendants when the owner's policy revokes them. The lineage is walked
    // here only then; under the default policy nothing outside the key's organisation changes.
    const before = this.deps.clock.now();
    const revokesAll = revokesDescendants(await keyPolicyIn(this.deps.stores, organisationId));
    let declared = changedOrganisations(found.key, before, revokesAll ? await activeDescendants(this.deps.stores, id, before) : []);
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.deps.unitOfWork.changeCredentials([...declared], (stores) => this.expose(stores, organisationId, id, match.url, exposure, declared));
      if (typeof outcome === 'string') return outcome;
      if (attempt === EXPOSURE_ATTEMPTS) throw new UnavailableError(EXPOSURE_LINEAGE_CHANGING_MESSAGE);
      declared = new Set([...declared, ...outcome.undeclared]);
    }
  }

  /**
   * One exposure in the unit of work given `stores`, whose declaration covers `declared`. Returns the
   * organisations it would change beyond `declared`, before writing anything, when there are any.
   */
  private async expose(
    stores: Stores,
    organisationId: string,
    id: string,
    url: string | null,
    exposure: KeyExposure,
    declared: ReadonlySet<string>,
  ): Promise<AlertOutcome | { readonly undeclared: readonly string[] }> {
    // Read again inside the unit of work: the key, its lineage and the policy as of this transaction.
    const key = await stores.apiKeys.findById(organisationId, id);
    if (key === null) return 'unknown';
    const now = this.deps.clock.now();
    const descendants = await activeDescendants(stores, key.id, now);
    const revokesAll = revokesDescendants(await keyPolicyIn(stores, organisationId));
    const undeclared = [...changedOrganisations(key, now, revokesAll ? descendants : [])].filter((o) => !declared.has(o));
    if (undeclared.length > 0) return { undeclared };
    if (!(await stores.apiKeys.recordExposure(key.id, url, now))) return 'repeat';
    const descendantKeyIds = descendants.map((d) => d.id).sort();
    await stores.audit.append({
      ...auditEntry(this.deps.random, 'api_key_exposed', now, SECRET_SCANNING, organisationId, key),
      exposure,
      descendantKeyIds,
    });
    const revoked = keyStatus(key, now) === 'active' && (await stores.apiKeys.revoke(organisationId, key.id, now));
    if (revoked) await stores.audit.append(auditEntry(this.deps.random, 'api_key_revoked', now, SECRET_SCANNING, organisationId, key));
    const cause = { type: 'secret_scanning' } as const;
    const events = revoked ? [{ type: 'api_key.exposed', cause } as const, { type: 'api_key.revoked', cause } as const] : [{ type: 'api_key.exposed', cause } as const];
    await notifyKeyEvents(stores, this.deps.random, events, now, key, { ...exposure, descendantKeyIds });
    if (revokesAll) {
      // Each descendant in its own organisation: its revocation, its audit chain, its outbox.
      for (const descendant of descendants) {
        if (!(await stores.apiKeys.revoke(descendant.organisationId, descendant.id, now))) continue;
        await stores.audit.append(auditEntry(this.deps.random, 'api_key_revoked', now, SECRET_SCANNING, descendant.organisationId, descendant));
        await notifyKeyEvents(stores, this.deps.random, [{ type: 'api_key.revoked', cause }], now, descendant);
      }
    }
    return revoked ? 'revoked' : 'recorded';
  }
}

/** Units of work one exposure may take when keys keep being issued into organisations its fence lacked. */
export const EXPOSURE_ATTEMPTS = 3;

/** The 503 of an exposure whose lineage reached new organisations on every attempt (nothing written for that key). */
export const EXPOSURE_LINEAGE_CHANGING_MESSAGE =
  "The reported key's descendants kept changing while the alert was handled; nothing was changed for that key; retry with exponential backoff";

function revokesDescendants(policy: KeyPolicy): boolean {
  return policy.exposureResponse === 'revoke_key_and_descendants';
}

/** The organisations whose credentials revoking `key` (when active at `now`) and `descendants` changes. */
function changedOrganisations(key: ApiKey, now: Date, descendants: readonly ApiKey[]): Set<string> {
  const organisations = new Set<string>();
  if (keyStatus(key, now) === 'active') organisations.add(key.organisationId);
  for (const d of descendants) organisations.add(d.organisationId);
  return organisations;
}
