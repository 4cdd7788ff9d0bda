/**
 * The HTTP listener and its graceful shutdown: stop accepting, let in-flight requests finish (up
 * to a grace period, then force-close what is left), and only then release the pools.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '@cos/core';
import type { HttpApp } from './container.js';

export const SHUTDOWN_GRACE_MS = 10_000;

export interface RunningServer {
  readonly server: Server;
  readonly host: string;
  readonly port: number;
  /** `http://host:port` (IPv6 hosts in brackets). */
  readonly url: string;
  /**
   * Stops accepting connections and resolves once every in-flight request has been answered, or
   * after `graceMs`, when the remaining connections are destroyed. Idempotent.
   */
  stop(graceMs?: number): Promise<{ forced: boolean; inFlight: number }>;
}

export async function listen(app: HttpApp, host: string, port: number, logger: Logger): Promise<RunningServer> {
  const server = createServer(app.callback());
  let inFlight = 0;
  server.on('request', (_req, res) => {
    inFlight += 1;
    res.once('close', () => {
      inFlight -= 1;
    });
  });
  server.on('clientError', (err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else socket.destroy(err);
  });

  await new Promise<void>((resolveListen, rejectListen) => {
    const onError = (e: Error): void => rejectListen(e);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolveListen();
    });
  });
  const address = server.address() as AddressInfo;
  const urlHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  let stopping: Promise<{ forced: boolean; inFlight: number }> | undefined;
  const stop = (graceMs = SHUTDOWN_GRACE_MS): Promise<{ forced: boolean; inFlight: number }> => {
    stopping ??= new Promise((resolveStop) => {
      const atStop = inFlight;
      let forced = false;
      // Keep-alive connections that are idle now, or become idle after their last response, go away.
      const sweeper = setInterval(() => server.closeIdleConnections(), 25);
      const deadline = setTimeout(() => {
        forced = true;
        logger.warn({ inFlight, graceMs }, 'shutdown grace period over: closing the remaining connections');
        server.closeAllConnections();
      }, graceMs);
      server.close(() => {
        clearInterval(sweeper);
        clearTimeout(deadline);
        resolveStop({ forced, inFlight: atStop });
      });
      server.closeIdleConnections();
    });
    return stopping;
  };

  return { server, host: address.address, port: address.port, url: `http://${urlHost}:${address.port}`, stop };
}
