/**
 * A TCP proxy the test owns (node:net), placed between a client (the service, a store) and a real
 * server (Postgres, Redis), so a test can take the dependency away and give it back without touching
 * the server itself:
 *
 *  - pass       bytes flow both ways (normal operation);
 *  - blackhole  bytes vanish both ways and nothing is reset: the client sees a server that never
 *               answers (the hang case); a connection accepted meanwhile never reaches the server.
 *               As on a real partition, a close on one side does not reach the other either (the
 *               FIN is lost): when the client gives up on a connection, the server's session, with
 *               any open transaction and the row locks it holds, stays until the network returns;
 *  - cut        every open connection and every new one is reset at once (the crash case).
 *
 * `restore()` goes back to pass; connections held through a blackhole are closed then on both sides
 * (as TCP would once packets flow again), so the server ends those sessions and the client must
 * notice and reconnect by itself.
 *
 * A trap (`failOn`) blackholes or cuts at the first client message matching a pattern, swallowing
 * that message, so a test can fail the dependency in the middle of a transaction.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export type ProxyMode = 'pass' | 'blackhole' | 'cut';

/**
 * Postgres extended-protocol messages that name a prepared statement: Parse ('P', length, name,
 * query) carries the SQL once per connection; afterwards Bind ('B', length, portal, name, ...)
 * carries only the name. A trap on a statement's SQL must also spring on a Bind of that statement.
 * The chunks are read as text, so the proxy stays protocol-agnostic (a Redis trap matches a script's
 * SHA1); names are taken to be identifiers (the store's are `cos_<n>`), which keeps a 'P' or 'B'
 * inside SQL text or a value from passing for a message.
 */
const PARSE_NAMED = /P[\s\S]{4}([A-Za-z_][\w$]*)\0([^\0]*)\0/g;
const BIND_NAMED = /B[\s\S]{4}[^\0]*\0([A-Za-z_][\w$]*)\0/g;

interface Link {
  readonly client: Socket;
  /** Null until connected, and for good when accepted during a blackhole (its handshake never reaches the server). */
  upstream: Socket | null;
  /** The link saw a blackhole: closes on either side stop there, and restore() closes it. */
  held: boolean;
  /** SQL of the named prepared statements this connection's Parse messages defined (names are per session). */
  readonly statements: Map<string, string>;
}

export class TcpProxy {
  private mode: ProxyMode = 'pass';
  private readonly links = new Set<Link>();
  private server: Server | null = null;
  private trap: { pattern: RegExp; mode: 'cut' | 'blackhole'; sprung: () => void } | null = null;
  /** Connections accepted in total (a reconnecting client opens new ones). */
  accepted = 0;
  /** Bytes received from clients in total (whether forwarded or not): did the client talk at all? */
  bytesFromClients = 0;
  private readonly watches = new Set<{ readonly pattern: RegExp; readonly seen: string[] }>();

  constructor(
    private targetHost: string,
    private targetPort: number,
  ) {}

  /** New connections go to another server from now on, and the open ones are reset (a failover's address switch). */
  retarget(host: string, port: number): void {
    this.targetHost = host;
    this.targetPort = port;
    this.reset(this.links);
  }

  /**
   * New connections go to another server from now on; the open ones stay with the server they
   * reached. So one address leads a new client elsewhere while the clients already connected keep
   * theirs: what another host sees at the same address.
   */
  redirect(host: string, port: number): void {
    this.targetHost = host;
    this.targetPort = port;
  }

  /** A proxy in front of the server of `url` (default port `defaultPort`), listening. */
  static async for(url: string, defaultPort: number): Promise<TcpProxy> {
    const target = new URL(url);
    return new TcpProxy(target.hostname || '127.0.0.1', Number(target.port || defaultPort)).listen();
  }

  get port(): number {
    const address = this.server?.address();
    if (address === null || address === undefined || typeof address === 'string') throw new Error('proxy not listening');
    return address.port;
  }

  /** `url` with its host and port replaced by this proxy's. */
  urlFor(url: string): string {
    const via = new URL(url);
    via.hostname = '127.0.0.1';
    via.port = String(this.port);
    return via.toString();
  }

  get currentMode(): ProxyMode {
    return this.mode;
  }

  /** Connections the proxy holds (in a blackhole also those whose client has gone). */
  get openConnections(): number {
    return this.links.size;
  }

  async listen(): Promise<this> {
    const server = createServer((client) => this.accept(client));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return this;
  }

  private accept(client: Socket): void {
    this.accepted += 1;
    const link: Link = { client, upstream: null, held: this.mode === 'blackhole', statements: new Map() };
    this.links.add(link);
    client.setNoDelay(true);
    const closed = (): void => this.closed(link);
    client.on('error', closed).on('close', closed);
    if (this.mode === 'cut') {
      client.resetAndDestroy();
      return;
    }
    client.on('data', (chunk: Buffer) => {
      this.bytesFromClients += chunk.length;
      const text = chunk.toString('latin1');
      for (const [, name, sql] of text.matchAll(PARSE_NAMED)) link.statements.set(name!, sql!);
      for (const watch of this.watches) {
        const seen = matching(watch.pattern, text, link.statements);
        if (seen !== null) watch.seen.push(seen);
      }
      const trap = this.trap;
      if (this.mode === 'pass' && trap !== null && matching(trap.pattern, text, link.statements) !== null) {
        // The matching message is swallowed: the network fails just before it.
        this.trap = null;
        if (trap.mode === 'cut') this.cut();
        else this.blackhole();
        trap.sprung();
        return;
      }
      if (this.mode === 'pass') link.upstream?.write(chunk);
    });
    if (this.mode === 'pass') this.connectUpstream(link);
  }

  private connectUpstream(link: Link): void {
    const upstream = connect({ host: this.targetHost, port: this.targetPort });
    upstream.setNoDelay(true);
    link.upstream = upstream;
    // Bytes the client sent before the upstream connected are queued by the socket itself.
    upstream.on('data', (chunk: Buffer) => {
      if (this.mode === 'pass') link.client.write(chunk);
    });
    const closed = (): void => this.closed(link);
    upstream.on('error', closed).on('close', closed);
  }

  /** One side closed: the other follows, unless a blackhole holds the link (the close is lost with the traffic). */
  private closed(link: Link): void {
    if (link.held || !this.links.delete(link)) return;
    link.client.destroy();
    link.upstream?.destroy();
  }

  /** Closes links now: the client side with a reset, the server side with a FIN (the server ends the session). */
  private reset(links: Iterable<Link>): void {
    for (const link of [...links]) {
      this.links.delete(link);
      if (!link.client.destroyed) link.client.resetAndDestroy();
      link.upstream?.destroy();
    }
  }

  /**
   * Arms a trap: the first client message matching `pattern` (SQL, also through a Bind of a named
   * prepared statement whose SQL matches; or any text) is not forwarded, and the proxy switches to
   * `mode` at that instant. Resolves when the trap is sprung.
   */
  failOn(pattern: RegExp, mode: 'cut' | 'blackhole'): Promise<void> {
    return new Promise<void>((resolve) => {
      this.trap = { pattern, mode, sprung: resolve };
    });
  }

  /**
   * Records, from now until `stop()`, every client message matching `pattern` as `failOn` matches it
   * (SQL, also through a Bind of a named prepared statement whose SQL matches; or any text): `seen`
   * holds the SQL (or the chunk's text) of each. So a test can tell which statements a client sent
   * while other, unrelated ones (a heartbeat, a poller) come and go on the same connections.
   */
  watch(pattern: RegExp): { readonly seen: readonly string[]; stop(): void } {
    const watch = { pattern, seen: [] as string[] };
    this.watches.add(watch);
    return { seen: watch.seen, stop: () => void this.watches.delete(watch) };
  }

  disarm(): void {
    this.trap = null;
  }

  /** Packets vanish from now on, in both directions; nothing is reset. */
  blackhole(): void {
    this.mode = 'blackhole';
    for (const link of this.links) link.held = true;
  }

  /** Every open connection is reset now and every new one is reset on arrival. */
  cut(): void {
    this.mode = 'cut';
    this.reset(this.links);
  }

  /** The network is back: connections held through a blackhole are closed on both sides. */
  restore(): void {
    this.mode = 'pass';
    this.reset([...this.links].filter((link) => link.held));
  }

  async close(): Promise<void> {
    this.trap = null;
    this.cut();
    const server = this.server;
    this.server = null;
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** The chunk's text when it matches `pattern`, else the SQL of a Bind in it of a prepared statement whose SQL does, else null. */
function matching(pattern: RegExp, text: string, statements: ReadonlyMap<string, string>): string | null {
  if (pattern.test(text)) return text;
  for (const [, name] of text.matchAll(BIND_NAMED)) {
    const sql = statements.get(name!);
    if (sql !== undefined && pattern.test(sql)) return sql;
  }
  return null;
}
