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
 * Lineage (C-61, C-62): the entry and the event list `descendant_key_ids`, the active keys the
 * reported key issued or rolled, directly or transitively; under the key policy
 * `revoke_key_and_descendants` each of them is revoked in the same unit of work, with its own
 * `api_key_revoked` entry and `api_key.revoked` event (actor: secret scanning).
 */
import { changesCredentialsOf } from '../access/credential-change.js';
import { digestKey, isWellFormedKey, keyStatus, type ApiKey } from '../domain/api-key.js';
import type { Stores } from '../ports/unit-of-work.js';
import { keyPolicyIn } from './api-keys.js';
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
    // Keys never become active again: one found inactive here is not revoked below, and unless the
    // organisation's policy revokes its descendants too, its unit of work changes no credential (so
    // a report of a dead key needs no fence). A policy changed in between meets the stores' guard.
    const mayRevoke =
      keyStatus(found.key, this.deps.clock.now()) === 'active' ||
      (await keyPolicyIn(this.deps.stores, organisationId)).exposureResponse === 'revoke_key_and_descendants';
    return this.deps.unitOfWork.run(async (stores): Promise<AlertOutcome> => {
      // Read again inside the unit of work: the key's state as of this transaction.
      const key = await stores.apiKeys.findById(organisationId, id);
      if (key === null) return 'unknown';
      const now = this.deps.clock.now();
      if (!(await stores.apiKeys.recordExposure(key.id, match.url, now))) return 'repeat';
      const descendants = await activeDescendants(stores, key, now);
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
      if ((await keyPolicyIn(stores, organisationId)).exposureResponse === 'revoke_key_and_descendants') {
        for (const descendant of descendants) {
          if (!(await stores.apiKeys.revoke(organisationId, descendant.id, now))) continue;
          await stores.audit.append(auditEntry(this.deps.random, 'api_key_revoked', now, SECRET_SCANNING, organisationId, descendant));
          await notifyKeyEvents(stores, this.deps.random, [{ type: 'api_key.revoked', cause }], now, descendant);
        }
      }
      return revoked ? 'revoked' : 'recorded';
    }, mayRevoke ? changesCredentialsOf(organisationId) : undefined);
  }
}

/**
 * The active keys `key` issued or rolled, directly or transitively (C-61), in the order found
 * (breadth first). The walk goes through keys of any state (a revoked child's active children are
 * still descendants) and visits each key once.
 */
export async function activeDescendants(stores: Stores, key: Pick<ApiKey, 'id' | 'organisationId'>, now: Date): Promise<ApiKey[]> {
  const seen = new Set<string>([key.id]);
  const found: ApiKey[] = [];
  let level: string[] = [key.id];
  while (level.length > 0) {
    const next: string[] = [];
    for (const parent of level) {
      for (const child of await stores.apiKeys.listCreatedBy(key.organisationId, parent)) {
        if (seen.has(child.id)) continue;
        seen.add(child.id);
        next.push(child.id);
        if (keyStatus(child, now) === 'active') found.push(child);
      }
    }
    level = next;
  }
  return found;
}
