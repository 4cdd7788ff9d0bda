/**
 * createKoaApp: the whole service as a Koa application. createV1Router: the /v1 surface as one
 * middleware for a host Koa application.
 *
 * Pipeline, built once per app (C-33, C-15, C-52), run as one function per request:
 *   request id (X-Request-Id) ->
 *   dispatch: match route (404/405) -> authenticate (401, counted per source address) ->
 *             rate limit (429) -> route: core authorise (403) -> body, if the route takes one
 *             (415/413/400) -> Idempotency-Key (400, 422, 409, or a replay) -> use case
 *             (403 -> 400 -> 404/409/...) -> the answer kept under its Idempotency-Key ->
 *   error response (errors.ts, the one table) -> rate-limit headers on every response ->
 *   one access-log line and one observation for the Metrics port (core.metrics).
 */
import Koa from 'koa';
import type { Core, Logger } from '@cos/core';
import { ClientAbortedError, DEFAULT_BODY_LIMIT_BYTES } from './body.js';
import { redact } from './redact.js';
import { createRequestLogger } from './middleware/access-log.js';
import { admitStep } from './middleware/authenticate.js';
import { createDispatch } from './middleware/dispatch.js';
import { createIdempotencySteps, IdempotentReplay } from './middleware/idempotency.js';
import { createErrorResponder, createRateLimitResponder } from './middleware/errors.js';
import { createRequestObserver } from './middleware/metrics.js';
import { createRateHeaderWriter } from './middleware/rate-limit-headers.js';
import { publicRateLimitStep } from './middleware/rate-limit.js';
import { beginRequest } from './middleware/request-id.js';
import { createSourceAddress } from './middleware/source-address.js';
import { apiKeyRoutes } from './routes/api-keys.js';
import { introspectRoutes } from './routes/introspect.js';
import { createRouteKit } from './routes/kit.js';
import { memberRoutes } from './routes/members.js';
import { auditEventRoutes } from './routes/audit-events.js';
import { usageRoutes } from './routes/usage.js';
import { metaRoutes } from './routes/meta.js';
import { organisationRoutes } from './routes/organisations.js';
import { compileRoutes } from './routes/route.js';
import { webhookRoutes } from './routes/webhooks.js';
import { secretScanningRoutes, type SecretScanningOptions } from './routes/secret-scanning.js';

export interface HttpDeps {
  core: Core;
  /** The core's Logger port; the cli passes pino. One line per request goes here. */
  logger: Logger;
}

export interface HttpOptions {
  /** The running build's semver, reported by GET /v1/version (C-3). */
  serviceVersion: string;
  /** Base of the 429 `type` address (C-51). Default https://errors.example.com. */
  errorsUrl?: string;
  /** Largest accepted request body in bytes (C-10). Default 64 KiB. */
  bodyLimitBytes?: number;
  /**
   * createKoaApp only: trust X-Forwarded-For for the client address (Koa's `app.proxy`), which keys
   * the per-source 401 counter (C-50). Default false. Under createV1Router the host app's own
   * `proxy` setting decides.
   */
  trustProxy?: boolean;
  /**
   * CIDRs of the proxies whose X-Forwarded-For hops are believed, taken rightmost first, when the
   * application trusts proxies (`trustProxy`, or the host app's `proxy`). Absent: only the peer's
   * own hop (the rightmost) is believed. The address found keys the per-source 401 counter and is
   * checked against a key's allowed networks.
   */
  trustedProxies?: readonly string[];
  /**
   * The secret-scanning alert endpoint, `POST /v1/secret-scanning/alerts`: absent (the default), the
   * path is unknown (404) like any other.
   */
  secretScanning?: SecretScanningOptions;
}

export const DEFAULT_ERRORS_URL = 'https://errors.example.com';
export const V1_PREFIX = '/v1';

function settings(options: HttpOptions): { errorsUrl: string; bodyLimitBytes: number } {
  if (typeof options.serviceVersion !== 'string' || options.serviceVersion.length === 0) {
    throw new TypeError('HttpOptions.serviceVersion is required');
  }
  const bodyLimitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  if (!Number.isInteger(bodyLimitBytes) || bodyLimitBytes <= 0) {
    throw new TypeError('HttpOptions.bodyLimitBytes must be a positive integer');
  }
  const errorsUrl = (options.errorsUrl ?? DEFAULT_ERRORS_URL).replace(/\/+$/, '');
  return { errorsUrl, bodyLimitBytes };
}

/** The full pipeline: answers every request it is given (nothing passes through). */
function createPipeline(deps: HttpDeps, options: HttpOptions): Koa.Middleware {
  const { core, logger } = deps;
  const { errorsUrl, bodyLimitBytes } = settings(options);
  const idempotency = createIdempotencySteps(core, logger);
  const kit = createRouteKit(core, bodyLimitBytes, idempotency);
  const sourceAddress = createSourceAddress(options.trustedProxies);
  const match = compileRoutes([
    ...metaRoutes(kit, options.serviceVersion),
    ...organisationRoutes(kit),
    ...memberRoutes(kit),
    ...auditEventRoutes(kit),
    ...usageRoutes(kit),
    ...apiKeyRoutes(kit),
    ...webhookRoutes(kit),
    ...introspectRoutes(kit),
    ...(options.secretScanning !== undefined ? secretScanningRoutes(kit, options.secretScanning, sourceAddress, logger) : []),
  ]);
  const refuseRate = createRateLimitResponder(errorsUrl);
  const dispatch = createDispatch(match, admitStep(core, sourceAddress, refuseRate), publicRateLimitStep(core, refuseRate));
  const respondWithError = createErrorResponder(errorsUrl);
  const writeRateHeaders = createRateHeaderWriter(core, sourceAddress);
  const logRequest = createRequestLogger(logger);
  // `core.metrics` may be absent on a Core from an older copy of @cos/core.
  const observe = createRequestObserver((core as Partial<Core>).metrics);

  // The middleware order of the architecture, as one function (no per-request composition):
  // request id -> [dispatch -> error response] -> rate-limit headers -> access log.
  return async (ctx) => {
    const state = beginRequest(ctx);
    try {
      try {
        await dispatch(ctx, state);
      } catch (err) {
        // A client that hung up mid-request gets no answer; its line says so (no 5xx, no stack).
        if (err instanceof ClientAbortedError) state.aborted = true;
        else if (err instanceof IdempotentReplay) idempotency.replay(ctx, err.response);
        else respondWithError(ctx, state, err);
      }
      // Kept before the answer leaves, so a retry that follows it finds it (any instance).
      if (state.idempotency !== undefined) await idempotency.finish(ctx, state);
      writeRateHeaders(ctx, state);
    } finally {
      logRequest(ctx, state);
      observe?.(ctx, state);
    }
  };
}

function isV1Path(path: string): boolean {
  return path.startsWith(V1_PREFIX) && (path.length === V1_PREFIX.length || path.charCodeAt(V1_PREFIX.length) === 47 /* / */);
}

/**
 * The /v1 surface as one middleware. It answers every request whose `ctx.path` is `/v1` or starts
 * with `/v1/` (unknown ones with 404/405) and passes everything else to `next`, so a host app can
 * put its own middleware in front and its own routes behind. To serve it under a prefix of the
 * host's, strip the prefix from `ctx.path` first, e.g. `host.use(mountAt('/compliance', v1))`;
 * `Location` and the 429 `instance` are taken from `ctx.originalUrl`, so they keep the prefix.
 */
export function createV1Router(deps: HttpDeps, options: HttpOptions): Koa.Middleware {
  const pipeline = createPipeline(deps, options);
  return (ctx, next) => (isV1Path(ctx.path) ? pipeline(ctx, next) : next());
}

/** The whole service: `http.createServer(createKoaApp(deps, options).callback())`. */
export function createKoaApp(deps: HttpDeps, options: HttpOptions): Koa {
  const pipeline = createPipeline(deps, options);
  const app = new Koa({ proxy: options.trustProxy ?? false });
  // Errors escaping the pipeline (socket errors while writing, etc.): log through the port
  // instead of Koa's default stderr printer.
  app.on('error', (err: unknown) => {
    const e = err instanceof Error ? err : new Error(String(err));
    deps.logger.error({ err: { type: e.name, message: redact(e.message) } }, 'http server error');
  });
  app.use(pipeline);
  return app;
}
