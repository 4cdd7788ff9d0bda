/**
 * Token introspection (RFC 7662 shape; C-270..C-273): another service of the platform asks whether a
 * key its client presented is valid, for which organisation, with which scopes, and whether it is
 * over its limit. The caller is a key of a system organisation holding `keys:introspect` (403
 * otherwise, by the one authorisation table).
 *
 * There is no second way of checking a key: the token goes through the admission's own lookup
 * (Admission.inspect: the credential cache and its freshness call, the status check, the counters),
 * so a key revoked at any instance is inactive on the next introspection at every instance, exactly
 * as its next direct request is refused.
 *
 * Every token that is not active (unknown, malformed, revoked, expired) gets the same answer,
 * exactly `{"active": false}`: no reason (RFC 7662 §2.2), and each is digested and looked up the same
 * way, compared in constant time.
 */
import { keyEnvironmentOf, keyRateLimitOf, metadataOf, scopesOf, type ApiKey, type KeyEnvironment } from '../domain/api-key.js';
import { addressAllowed } from '../domain/key-network.js';
import type { Principal } from '../domain/principal.js';
import { encodeScopes } from '../domain/scopes.js';
import { checkIntrospect } from '../validation/introspect.js';
import { unwrap } from '../validation/issues.js';
import type { Admission, LookAhead } from './admission.js';
import { authorise } from './authorise.js';

/** The answer for a token that is not active: nothing else (RFC 7662 §2.2). */
export interface InactiveTokenView {
  active: false;
}

/** The answer for an active key (RFC 7662 §2.2 members, plus the key's own). */
export interface ActiveTokenView {
  active: true;
  token_type: 'api_key';
  organisation_id: string;
  key_id: string;
  key_prefix: string;
  environment: KeyEnvironment;
  /** The key's scopes, space-separated (RFC 7662 `scope`). */
  scope: string;
  /** Issued at, epoch seconds. */
  iat: number;
  /** Expires at, epoch seconds; absent for a key that never expires. */
  exp?: number;
  /** The key's metadata (`{}` for none). */
  metadata: Readonly<Record<string, string>>;
  /** The key's own limit per minute (C-290), null for none. */
  rate_limit_per_minute: number | null;
  /** With `source_address`: whether the key's networks allow that address (always true for a key without restrictions). */
  source_address_allowed?: boolean;
  /** With `count: true`: the window after this request, its organisation's or its key's own, whichever has fewer left (C-293). */
  rate_limit?: { limit: number; remaining: number; reset: number };
  /** With `count: true`, only when the window is exhausted: the asking service answers its client 429. */
  rate_limited?: true;
}

export type IntrospectionView = InactiveTokenView | ActiveTokenView;

const INACTIVE: InactiveTokenView = Object.freeze({ active: false });

function epochSeconds(at: Date): number {
  return Math.floor(at.getTime() / 1000);
}

/**
 * The active record of each key record, built once: a token introspected again and again (a gateway
 * checking the same client's key on every call) is answered from the record it was built from. The
 * stores hand out the same key object for as long as it is unchanged (the credential cache's entry,
 * the SQLite reader's kept result), and any change reads a new object, which gets its own record; so
 * the record is as fresh as the lookup that found the key. Entries go with their key objects.
 */
const activeViews = new WeakMap<ApiKey, Readonly<ActiveTokenView>>();
/** The JSON text of each record built once (activeViews', and the inactive answer). */
const viewTexts = new WeakMap<IntrospectionView, string>([[INACTIVE, JSON.stringify(INACTIVE)]]);

function activeViewOf(key: ApiKey): Readonly<ActiveTokenView> {
  let view = activeViews.get(key);
  if (view === undefined) {
    const built: ActiveTokenView = {
      active: true,
      token_type: 'api_key',
      organisation_id: key.organisationId,
      key_id: key.id,
      key_prefix: key.keyPrefix,
      environment: keyEnvironmentOf(key),
      scope: encodeScopes(scopesOf(key)),
      iat: epochSeconds(key.createdAt),
      metadata: metadataOf(key),
      rate_limit_per_minute: keyRateLimitOf(key),
    };
    if (key.expiresAt !== null) built.exp = epochSeconds(key.expiresAt);
    view = Object.freeze(built);
    activeViews.set(key, view);
  }
  return view;
}

/**
 * The JSON text of an introspection's answer: `JSON.stringify(view)`, serialised once for a record
 * answered as built (no `source_address`, no `count`) and for `{"active": false}`.
 */
export function introspectionJson(view: IntrospectionView): string {
  let text = viewTexts.get(view);
  if (text === undefined) {
    text = JSON.stringify(view);
    if (Object.isFrozen(view)) viewTexts.set(view, text);
  }
  return text;
}

export class Introspection {
  constructor(private readonly admission: Pick<Admission, 'inspect'>) {}

  /**
   * POST /v1/introspect, body {token, count?, source_address?}: 403 unless the caller may
   * introspect, then 400 for a body that is not one, then the token's answer. With `source_address`
   * the answer says whether the key's networks allow it (`source_address_allowed`). With `count` the
   * request is counted against the token's organisation and recorded as the key's use, as a direct
   * request would be; the answer then carries `rate_limit`, and `rate_limited: true` when that
   * window is exhausted (the token stays active: the asking service answers its client 429).
   * `lookAhead`: the admission's lookup of this body's token, begun with the caller's (C-274).
   */
  async introspect(principal: Principal, body: unknown, lookAhead?: LookAhead): Promise<IntrospectionView> {
    authorise(principal, 'keys.introspect');
    const input = unwrap(checkIntrospect(body));
    // A lookup begun with the caller's admission (C-274) answers exactly this: the same token, nothing counted.
    const found = await (lookAhead !== undefined && !input.count && lookAhead.token === input.token ? lookAhead.inspection : this.admission.inspect(input.token, input.count));
    if (!found.active) return INACTIVE;
    const { key } = found.credential;
    const record = activeViewOf(key);
    const decision = found.decision;
    if (input.sourceAddress === null && decision === null) return record;
    const view: ActiveTokenView = { ...record };
    // The same check a direct request from that address meets (C-262), without counting anything more.
    if (input.sourceAddress !== null) view.source_address_allowed = addressAllowed(key, input.sourceAddress);
    if (decision !== null) {
      view.rate_limit = { limit: decision.limit, remaining: decision.remaining, reset: decision.resetEpochSeconds };
      if (!decision.allowed) view.rate_limited = true;
    }
    return view;
  }
}
