/**
 * Last step of the pipeline: one log line per request through the core's Logger port: method,
 * route template, path, status, latency, request id, and the organisation and key ids once
 * authenticated. Never the Authorization header, a key or a query string (C-31); the path is
 * redacted in case a caller put a key into it. 500s carry the error's name, message and stack
 * (redacted), other 5xx its name and message; 500 is logged at error level, other 5xx at warn.
 * A request the client abandoned before it was complete got no answer: it is logged at info as
 * `request aborted by the client`, with `status: null` and `aborted: true`.
 */
import type Koa from 'koa';
import { performance } from 'node:perf_hooks';
import type { Logger } from '@cos/core';
import { redact } from '../redact.js';
import type { CosRequestState } from '../state.js';

export type RequestLogger = (ctx: Koa.Context, state: CosRequestState) => void;

function describeFailure(failure: unknown, withStack: boolean): Record<string, unknown> {
  if (failure instanceof Error) {
    const cause = (failure as { cause?: unknown }).cause;
    return {
      type: failure.name,
      message: redact(failure.message),
      ...(withStack && failure.stack !== undefined ? { stack: redact(failure.stack) } : {}),
      ...(cause instanceof Error ? { cause: redact(`${cause.name}: ${cause.message}`) } : {}),
    };
  }
  return { type: typeof failure, message: redact(String(failure)) };
}

export function createRequestLogger(logger: Logger): RequestLogger {
  // Port method optional: absent means every level is logged.
  const enabled = (level: 'info' | 'warn' | 'error'): boolean => logger.isLevelEnabled?.(level) ?? true;
  return (ctx, state) => {
    if (state.aborted) {
      if (!enabled('info')) return;
      logger.info(
        {
          request_id: redact(state.requestId),
          method: ctx.method,
          route: state.route ?? null,
          path: redact(ctx.path),
          status: null,
          aborted: true,
          latency_ms: Math.round((performance.now() - state.startedAt) * 1000) / 1000,
        },
        'request aborted by the client',
      );
      return;
    }
    const status = ctx.res.statusCode; // what ctx.status reads, without Koa's delegation
    // Nothing to build (no redaction, no field object) for a line the logger would drop.
    if (!enabled(status === 500 ? 'error' : status >= 500 ? 'warn' : 'info')) return;
    const fields: Record<string, unknown> = {
      // A caller-chosen request id is echoed to the caller (C-15) but may carry a key: redact it here.
      request_id: redact(state.requestId),
      method: ctx.method,
      route: state.route ?? null,
      path: redact(ctx.path),
      status,
      latency_ms: Math.round((performance.now() - state.startedAt) * 1000) / 1000,
    };
    if (state.principal !== undefined) {
      fields.organisation_id = state.principal.organisationId;
      fields.key_id = state.principal.keyId;
    }
    if (state.errorCode !== undefined) fields.error_code = state.errorCode;
    if (status >= 500 && state.failure !== undefined) fields.err = describeFailure(state.failure, status === 500);
    if (status === 500) logger.error(fields, 'request failed');
    else if (status >= 500) logger.warn(fields, 'request failed');
    else logger.info(fields, 'request completed');
  };
}
