/**
 * POST /v1/secret-scanning/alerts: the provider side of the secret-scanning partner programme
 * (spec §2 "Key format"). Present only when the scanner's public keys are configured.
 *
 * Authenticated by the alert's signature (ECDSA P-256 / SHA-256 over the exact bytes received), not
 * by an API key. In order:
 *  1. no `Github-Public-Key-Identifier` or `Github-Public-Key-Signature` header -> 401, body unread;
 *  2. the body: JSON content type (415), at most 1 MiB by default (413);
 *  3. unknown key id or a signature that does not verify -> 401; like every 401, counted in the
 *     source address's scope (C-50), so a flood of bad signatures turns into 429s;
 *  4. a verified alert counts in its own global scope (secretScanningRateLimitPerMinute), never
 *     in the /health + /version one, so a burst of alerts is not refused for a flood of bad ones;
 *  5. the JSON (400 malformed), the matches (400 with details) and the revocations (the core's
 *     SecretScanning), committed before the answer (C-36);
 *  6. 200 with the programme's feedback: `[{token_hash, token_type, label}]`, never the token.
 */
import type Koa from 'koa';
import { INVALID_SIGNATURE_MESSAGE, UnauthorizedError, type AuthFailureReason, type Core, type Logger, type ScannerKeySet } from '@cos/core';
import { parseJson, readJsonBytes } from '../body.js';
import type { SourceAddress } from '../middleware/source-address.js';
import type { CosRequestState } from '../state.js';
import type { RouteKit } from './kit.js';
import { signedRoute, type Route } from './route.js';

export const SECRET_SCANNING_PATH = '/v1/secret-scanning/alerts';
export const DEFAULT_ALERT_BODY_LIMIT_BYTES = 1024 * 1024;
// The 401's sentence is core's; exported here too, where it always was.
export { INVALID_SIGNATURE_MESSAGE };
/** The alert's base64 DER signature, as the partner programme sends it (lower case: Node's header names). */
export const SIGNATURE_HEADER = 'github-public-key-signature';
/** The identifier of the key that signed the alert. */
export const KEY_IDENTIFIER_HEADER = 'github-public-key-identifier';

export interface SecretScanningOptions {
  /** The scanner's current public keys (re-read by the host on SIGHUP: called on every alert). */
  keys(): ScannerKeySet;
  /**
   * Called with an identifier the current keys do not hold, before the alert is refused: the host
   * may fetch the programme's key list again (rate-limited); the alert is then verified with
   * `keys()` once more.
   */
  refreshFor?(identifier: string): Promise<void>;
  /** Largest alert body in bytes. Default 1 MiB. */
  bodyLimitBytes?: number;
}

/** Why an alert is refused with 401 (the `reason` of the log line and of cos_auth_failures_total). */
type ScannerRefusal = Extract<AuthFailureReason, `scanner_${string}`>;

/** A key identifier is public (the programme publishes it), but a caller chooses it: logged at most this long. */
const MAX_LOGGED_IDENTIFIER = 100;

function header(ctx: Koa.Context, name: string): string | undefined {
  const value = ctx.req.headers[name];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

export function secretScanningRoutes(kit: RouteKit, options: SecretScanningOptions, sourceAddress: SourceAddress, logger: Logger): Route[] {
  const { core } = kit;
  const limit = options.bodyLimitBytes ?? DEFAULT_ALERT_BODY_LIMIT_BYTES;
  // `core.metrics` may be absent on a Core from an older copy of @cos/core.
  const metrics = (core as Partial<Core>).metrics;
  const refuse = async (ctx: Koa.Context, state: CosRequestState, reason: ScannerRefusal, identifier?: string): Promise<never> => {
    // Counted like every other 401 (C-50); over the limit this throws the 429 instead.
    state.decision = await core.rateLimiter.enforce({ kind: 'source', address: sourceAddress(ctx) });
    // The answer stays the same for every reason (a caller learns nothing); the log and the metric say which.
    metrics?.authFailure(reason);
    logger.warn(
      { request_id: state.requestId, reason, ...(identifier !== undefined ? { key_identifier: identifier.slice(0, MAX_LOGGED_IDENTIFIER) } : {}) },
      'secret-scanning alert refused (401)',
    );
    throw new UnauthorizedError(INVALID_SIGNATURE_MESSAGE);
  };
  return [
    signedRoute('POST', SECRET_SCANNING_PATH, async (ctx, state) => {
      const identifier = header(ctx, KEY_IDENTIFIER_HEADER);
      const signature = header(ctx, SIGNATURE_HEADER);
      if (identifier === undefined || signature === undefined) return refuse(ctx, state, 'scanner_signature_missing');
      const raw = await readJsonBytes(ctx.req, limit);
      let keys = options.keys();
      if (options.refreshFor !== undefined && keys.has?.(identifier.trim()) === false) {
        // A key the programme published since the last fetch: fetch again, then verify.
        await options.refreshFor(identifier.trim());
        keys = options.keys();
      }
      if (!keys.verify(identifier, signature, raw)) {
        const unknown = keys.has?.(identifier.trim()) === false;
        return refuse(ctx, state, unknown ? 'scanner_unknown_key_identifier' : 'scanner_bad_signature', identifier);
      }
      state.decision = await core.rateLimiter.enforce({ kind: 'secret_scanning' });
      const report = await core.secretScanning.report(parseJson(raw));
      logger.info({ request_id: state.requestId, ...report.outcomes }, 'secret-scanning alert handled');
      kit.json(ctx, 200, report.feedback);
    }),
  ];
}
