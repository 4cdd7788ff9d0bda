/**
 * Last step of the pipeline, beside the access log: one observation per request through the core's
 * Metrics port (method, route template, status, seconds). The route is the matched template, never
 * the raw path, so ids and keys in a path never become label values; a path no route matches is
 * `unmatched`.
 */
import type Koa from 'koa';
import { performance } from 'node:perf_hooks';
import { noopMetrics, type Metrics } from '@cos/core';
import type { CosRequestState } from '../state.js';

const UNMATCHED_ROUTE = 'unmatched';

export type RequestObserver = (ctx: Koa.Context, state: CosRequestState) => void;

/** Null when nobody reads the metrics (the port is the no-op one, or the Core predates the port). */
export function createRequestObserver(metrics: Metrics | undefined): RequestObserver | null {
  if (metrics === undefined || metrics === noopMetrics) return null;
  return (ctx, state) => {
    metrics.httpRequest(ctx.method, state.route ?? UNMATCHED_ROUTE, state.aborted ? 'aborted' : ctx.status, (performance.now() - state.startedAt) / 1000);
  };
}
