/**
 * The operations listener of `serve` (OPS_PORT, bound to OPS_HOST): probes and metrics for the
 * platform, apart from the API. No API key, no rate limit, not under /v1, never on the public port:
 * a storm of 429s on the API cannot fail a probe, and the API's limiter never sees a probe.
 *
 *   GET /livez    200 while the process serves requests at all; touches no dependency.
 *   GET /readyz   200 when the API is listening and the store answers within its health budget
 *                 (C-4's probe, 1 s); 503 before that, when the store does not, and while draining
 *                 after SIGTERM (so a load balancer stops sending before the port closes). Under
 *                 `serve`'s primary: 200 only when every worker is listening and its probe answers.
 *   GET /metrics  the Prometheus text format (metrics.ts).
 *
 * HEAD is answered like GET without a body; other methods get 405, other paths 404 (plain text).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HealthReport } from '@cos/core';
import type { HttpApp } from './compose.js';
import type { PrometheusMetrics } from './metrics.js';

export interface OpsDeps {
  /** The store probe of /v1/health (Core.health), bounded by its own timeout; never throws. */
  readonly health: { check(): Promise<HealthReport> };
  /**
   * Instead of `health`, when given: null when ready, else why not (the answer's text). `serve`'s
   * primary answers with its workers' readiness, each worker's store probe asked over IPC.
   */
  readonly readiness?: () => Promise<string | null>;
  readonly metrics: Pick<PrometheusMetrics, 'render' | 'contentType'>;
}

type OpsPhase = 'starting' | 'serving' | 'draining';

export interface OpsApp extends HttpApp {
  /** starting (the default) -> serving once the API listens -> draining on SIGTERM. */
  phase: OpsPhase;
}

const TEXT = 'text/plain; charset=utf-8';

function answer(req: IncomingMessage, res: ServerResponse, status: number, body: string, contentType = TEXT, headers: Record<string, string> = {}): void {
  const bytes = Buffer.from(body, 'utf8');
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': bytes.length, 'Cache-Control': 'no-store', ...headers });
  res.end(req.method === 'HEAD' ? undefined : bytes);
}

export function createOpsApp(deps: OpsDeps): OpsApp {
  const app: OpsApp = {
    phase: 'starting',
    callback: () => (req, res) => {
      void handle(req, res).catch(() => {
        if (!res.headersSent) answer(req, res, 500, 'internal error\n');
        else res.destroy();
      });
    },
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    if (path !== '/livez' && path !== '/readyz' && path !== '/metrics') return answer(req, res, 404, 'not found\n');
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(req, res, 405, 'method not allowed\n', TEXT, { Allow: 'GET, HEAD' });
    if (path === '/livez') return answer(req, res, 200, 'ok\n');
    if (path === '/metrics') return answer(req, res, 200, await deps.metrics.render(), deps.metrics.contentType);
    if (app.phase !== 'serving') return answer(req, res, 503, `${app.phase}\n`);
    if (deps.readiness !== undefined) {
      const notReady = await deps.readiness();
      if (app.phase !== 'serving') return answer(req, res, 503, `${app.phase}\n`);
      return notReady === null ? answer(req, res, 200, 'ok\n') : answer(req, res, 503, `${notReady}\n`);
    }
    const report = await deps.health.check();
    // The store may have answered after SIGTERM arrived: draining wins.
    if (app.phase !== 'serving') return answer(req, res, 503, `${app.phase}\n`);
    if (report.status !== 'ok') return answer(req, res, 503, 'store unavailable\n');
    return answer(req, res, 200, 'ok\n');
  }

  return app;
}
