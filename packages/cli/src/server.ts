/**
 * The HTTP listener and its graceful shutdown: stop accepting, let in-flight requests finish (up
 * to a grace period, then force-close what is left), and only then release the pools.
 *
 * Shutdown is connection-aware. `http.Server.close()` destroys at once every connection that is
 * not in the middle of a request: one accepted a moment ago whose request is still on its way, or
 * a keep-alive connection on which the client has just sent its next request. Those clients would
 * see a reset for a request they have already sent. So stopping here closes the listening socket
 * only (net.Server's close), answers every request with `Connection: close` from then on, and
 * closes a connection once it has been idle for `idleGraceMs` since the stop or since its last
 * response, whichever is later.
 *
 * Hand-written rather than Node's `closeIdleConnections()` / `closeAllConnections()` or
 * `http-terminator`: each of those resets a keep-alive connection whose next request is already
 * sent, and http-terminator reads the socket's private `_httpMessage`
 * (docs/decisions/0018-hand-written-graceful-shutdown.md). serve.test.ts pins this file's behaviour:
 * the SIGTERM drain with 100 keep-alive connections, a second signal cutting a stuck drain short,
 * `serve | head -2`.
 *
 * Holding connections is bounded too. A connection must deliver its header section within
 * `headersTimeoutMs` (a silent one included) and its whole request within `requestTimeoutMs`,
 * checked every second at most, by Node and, as a backstop for a connection Node's check misses, by
 * this listener; keep-alive connections idle for KEEP_ALIVE_TIMEOUT_MS are closed.
 * And at most `maxConnections` are open at once, below the process's descriptor limit. At the cap a
 * new connection closes another (C-140): the least recently active one that is idle, silent, or
 * still sending an unauthenticated request (the connection map is kept in the order they became
 * idle), else the least recently active one still sending an authenticated request's body. So
 * neither idle connections nor slow bodies can lock legitimate clients out, and unauthenticated
 * connections only get the room that authenticated requests leave. A connection whose request has
 * fully arrived is never closed for the cap; when every connection has one, the newcomer is closed.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Server as NetServer, type AddressInfo, type Socket } from 'node:net';
import { LogThrottle, type Logger } from '@cos/core';
import type { HttpApp } from './compose.js';

export const SHUTDOWN_GRACE_MS = 10_000;
/** During shutdown, how long an idle connection may still bring a request before it is closed. */
const CONNECTION_IDLE_GRACE_MS = 500;
/** The header section of a request must arrive within this (HEADERS_TIMEOUT_MS); a silent connection too. */
const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
/** The whole request, body included, must arrive within this (REQUEST_TIMEOUT_MS). */
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
/** An idle keep-alive connection is closed after this (Node's default, stated here). */
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** At most this often a "connection cap reached" warning; the next one says how many were closed meanwhile. */
const CAP_WARN_INTERVAL_MS = 60_000;
/** At most this often a warning that the backstop closed connections Node's own timeout check let through. */
const BACKSTOP_WARN_INTERVAL_MS = 60_000;

export interface ListenOptions {
  /** Default CONNECTION_IDLE_GRACE_MS. */
  readonly idleGraceMs?: number;
  /**
   * Connections held at once (default: no cap). At the cap a new connection closes the least
   * recently active one (accepted or answered longest ago) that is idle or still sending an
   * unauthenticated request, else one still sending an authenticated request's body; when every
   * connection has a request that has fully arrived, the new one is closed instead.
   */
  readonly maxConnections?: number;
  /** Default DEFAULT_HEADERS_TIMEOUT_MS; at most requestTimeoutMs. */
  readonly headersTimeoutMs?: number;
  /** Default DEFAULT_REQUEST_TIMEOUT_MS. */
  readonly requestTimeoutMs?: number;
  /** Default KEEP_ALIVE_TIMEOUT_MS. */
  readonly keepAliveTimeoutMs?: number;
}

/** An app with its own answer to requests Node's parser refuses (HttpApp.clientError). */
type ClientErrorHandler = NonNullable<HttpApp['clientError']>;
type ConnectHandler = NonNullable<HttpApp['connect']>;
const SWEEP_INTERVAL_MS = 20;

export interface StopResult {
  /** True when the grace period ran out and connections were destroyed with requests in flight. */
  readonly forced: boolean;
  /** Requests in flight when stop() was called. */
  readonly inFlight: number;
}

export interface RunningServer {
  readonly server: Server;
  readonly host: string;
  readonly port: number;
  /** `http://host:port` (IPv6 hosts in brackets). */
  readonly url: string;
  /** Requests being handled right now. */
  inFlight(): number;
  /**
   * Stops accepting connections and resolves once every in-flight request has been answered and
   * every connection closed, or after `graceMs`, when what is left is destroyed. Idempotent.
   */
  stop(graceMs?: number): Promise<StopResult>;
  /** Destroys every connection now (a second signal). */
  destroyAll(): void;
}

interface ConnectionState {
  /** Requests being handled on this connection. */
  active: number;
  /** When the connection last became idle (accepted, or its last response finished). */
  idleSince: number;
  /** The latest request handed to the app on this connection (its body may still be arriving). */
  request: IncomingMessage | undefined;
  /** When that request was handed to the app. */
  requestSince: number;
  /** The backstop already answered this connection 408 (see timeoutBackstop). */
  timedOut: boolean;
}

/**
 * Whether closing the connection would cut off a request that has fully arrived (C-140): one in
 * flight whose body is complete, or more than one (pipelined requests behind the first are parsed
 * only once it has fully arrived).
 */
function holdsArrivedRequest(state: ConnectionState): boolean {
  return state.active > 1 || (state.active === 1 && state.request?.complete === true);
}

/**
 * How often Node looks for connections past their header or request timeout (its default, 30 s,
 * let a 60 s header timeout fire only after up to 90 s): a quarter of the header timeout, 50 ms to 1 s.
 */
export function connectionsCheckingIntervalFor(headersTimeoutMs: number): number {
  return Math.max(50, Math.min(1_000, Math.floor(headersTimeoutMs / 4)));
}

export async function listen(
  app: HttpApp,
  host: string,
  port: number,
  logger: Logger,
  options: ListenOptions = {},
): Promise<RunningServer> {
  const idleGraceMs = options.idleGraceMs ?? CONNECTION_IDLE_GRACE_MS;
  const maxConnections = options.maxConnections ?? Number.POSITIVE_INFINITY;
  const headersTimeout = options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
  const requestTimeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const handle = app.callback();
  /** Every open connection, in the order they last became idle (re-inserted when a response ends). */
  const connections = new Map<Socket, ConnectionState>();
  let inFlight = 0;
  let stopping = false;

  // No Host and an unmet Expect reach the app, which answers them in the contract's shape (Node's
  // own answers are a bare 400 and a bare 417).
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const state = connections.get(req.socket);
    if (state !== undefined) {
      state.active += 1;
      state.request = req;
      state.requestSince = Date.now();
    }
    inFlight += 1;
    if (stopping) res.shouldKeepAlive = false;
    res.on('close', answered);
    handle(req, res);
  };
  /** A response's 'close' (once per response; one listener for all of them, no closure per request). */
  function answered(this: ServerResponse): void {
    inFlight -= 1;
    const socket = this.req.socket;
    const state = connections.get(socket);
    if (state === undefined) return; // the connection is closed: nothing of it is tracked any more
    state.active -= 1;
    if (state.active === 0) state.request = undefined;
    state.idleSince = Date.now();
    // To the end of the idle order, unless the answer closes the connection: then it keeps its
    // place, ahead of connections accepted after it.
    if (this.shouldKeepAlive && connections.delete(socket)) connections.set(socket, state);
  }
  // Node checks the header and request timeouts every connectionsCheckingInterval: a silent
  // connection counts as one whose headers have not arrived. Past either timeout the connection gets
  // the app's 408 (clientError, ERR_HTTP_REQUEST_TIMEOUT) and is closed.
  const server = createServer(
    {
      requireHostHeader: app.clientError === undefined,
      headersTimeout,
      requestTimeout,
      connectionsCheckingInterval: connectionsCheckingIntervalFor(headersTimeout),
    },
    onRequest,
  );
  const keepAliveTimeout = options.keepAliveTimeoutMs ?? KEEP_ALIVE_TIMEOUT_MS;
  server.keepAliveTimeout = keepAliveTimeout;
  if (app.clientError !== undefined) server.on('checkExpectation', onRequest);
  // Requests the HTTP parser refuses get the app's answer (the standard error shape) instead of
  // Node's bare status line, when the app has one.
  const clientError: ClientErrorHandler | undefined = app.clientError?.bind(app);
  if (clientError !== undefined) server.on('clientError', clientError);
  // CONNECT (a tunnel request) gets the app's answer instead of a silently closed connection.
  const connect: ConnectHandler | undefined = app.connect?.bind(app);
  if (connect !== undefined) server.on('connect', connect);
  let shed = 0;
  let refused = 0;
  const capWarnings = new LogThrottle(CAP_WARN_INTERVAL_MS, Date.now);
  const close = (socket: Socket): true => {
    connections.delete(socket);
    socket.destroy();
    shed += 1;
    return true;
  };
  /**
   * At the cap (C-140): closes the least recently active connection that is idle or still sending
   * an unauthenticated request (no Authorization header: a request with one is answered 401 before
   * its body when the key does not authenticate), else the least recently active one still sending
   * an authenticated request's body; false when every connection has a request that has fully
   * arrived.
   */
  const shedOne = (): boolean => {
    let authenticatedBody: Socket | undefined;
    for (const [socket, state] of connections) {
      if (state.active === 0) return close(socket);
      if (holdsArrivedRequest(state)) continue;
      if (state.request?.headers.authorization === undefined) return close(socket);
      authenticatedBody ??= socket;
    }
    return authenticatedBody !== undefined && close(authenticatedBody);
  };
  server.on('connection', (socket: Socket) => {
    if (connections.size >= maxConnections && !shedOne()) {
      socket.destroy();
      refused += 1;
    } else {
      connections.set(socket, { active: 0, idleSince: Date.now(), request: undefined, requestSince: 0, timedOut: false });
      socket.once('close', () => connections.delete(socket));
    }
    if (shed + refused > 0 && capWarnings.pass() !== null) {
      logger.warn(
        { port: (server.address() as AddressInfo | null)?.port ?? null, max_connections: maxConnections, idle_closed: shed, refused },
        'connection cap reached: idle connections closed to admit new ones (MAX_CONNECTIONS)',
      );
      shed = 0;
      refused = 0;
    }
  });

  // The timeout backstop. Node enforces the header and request timeouts from its own list of
  // connections, checked every connectionsCheckingInterval; a connection that list loses is never
  // timed out, and a silent connection would then hold its place until the client leaves. So every
  // check interval this listener also looks at its own map: a connection with no request in flight
  // for longer than the keep-alive timeout plus the header timeout (an idle keep-alive connection is
  // closed at the first, and a request begun within it must have its headers within the second),
  // or whose request's body is still arriving past the request timeout, plus two check intervals of
  // slack, is past every deadline Node would apply. It gets the 408 Node's check would have given
  // (the app's answer when it has one) and is closed. It never acts before Node would.
  const checkingInterval = connectionsCheckingIntervalFor(headersTimeout);
  const silentLimitMs = keepAliveTimeout + headersTimeout + 2 * checkingInterval;
  const bodyLimitMs = requestTimeout + 2 * checkingInterval;
  const backstopWarnings = new LogThrottle(BACKSTOP_WARN_INTERVAL_MS, Date.now);
  let timedOutByBackstop = 0;
  const timeOut = (socket: Socket, state: ConnectionState): void => {
    state.timedOut = true;
    timedOutByBackstop += 1;
    const error = Object.assign(new Error('request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
    if (clientError !== undefined) {
      clientError(error, socket);
    } else {
      if (socket.writable) socket.write('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
      socket.destroy();
    }
  };
  const timeoutBackstop = setInterval(() => {
    const now = Date.now();
    for (const [socket, state] of connections) {
      if (state.timedOut) continue;
      if (state.active === 0 ? now - state.idleSince > silentLimitMs : state.request?.complete === false && now - state.requestSince > bodyLimitMs) {
        timeOut(socket, state);
      }
    }
    if (timedOutByBackstop > 0 && backstopWarnings.pass() !== null) {
      logger.warn(
        { port: (server.address() as AddressInfo | null)?.port ?? null, closed: timedOutByBackstop },
        "connections past their header or request timeout that Node's own check missed were answered 408 and closed",
      );
      timedOutByBackstop = 0;
    }
  }, checkingInterval);
  timeoutBackstop.unref();
  server.once('close', () => clearInterval(timeoutBackstop));

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

  const destroyAll = (): void => {
    for (const socket of connections.keys()) socket.destroy();
  };

  let stopped: Promise<StopResult> | undefined;
  const stop = (graceMs = SHUTDOWN_GRACE_MS): Promise<StopResult> => {
    stopped ??= new Promise<StopResult>((resolveStop) => {
      stopping = true;
      const stoppedAt = Date.now();
      const atStop = inFlight;
      let forced = false;
      const sweep = (): void => {
        const now = Date.now();
        for (const [socket, state] of connections) {
          if (state.active === 0 && now - Math.max(state.idleSince, stoppedAt) >= idleGraceMs) socket.destroy();
        }
      };
      const sweeper = setInterval(sweep, SWEEP_INTERVAL_MS);
      const deadline = setTimeout(() => {
        forced = inFlight > 0;
        logger.warn({ inFlight, graceMs }, 'shutdown grace period over: closing the remaining connections');
        destroyAll();
      }, graceMs);
      // net.Server's close: stop listening and call back once the last connection has closed,
      // without http.Server's immediate destruction of the connections idle at this instant.
      NetServer.prototype.close.call(server, () => {
        clearInterval(sweeper);
        clearTimeout(deadline);
        resolveStop({ forced, inFlight: atStop });
      });
      sweep();
    });
    return stopped;
  };

  return {
    server,
    host: address.address,
    port: address.port,
    url: `http://${urlHost}:${address.port}`,
    inFlight: () => inFlight,
    stop,
    destroyAll,
  };
}
