/**
 * A TCP proxy the test owns (node:net), placed between the service and a real server (Postgres),
 * so a test can take the dependency away and give it back without touching the server itself:
 *
 *  - pass       forward bytes both ways (normal operation);
 *  - blackhole  accept connections but forward nothing in either direction: packets vanish, the
 *               service sees a dependency that never answers (the hang case);
 *  - cut        reset every open connection and every new one at once (the crash case).
 *
 * `restore()` goes back to pass; connections that were held during a blackhole are reset then (TCP
 * would eventually give up on them too), so the service must notice and reconnect by itself.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export type ProxyMode = 'pass' | 'blackhole' | 'cut';

/**
 * Postgres extended-protocol messages that name a prepared statement of the store (pg-client.ts
 * names them `cos_<n>`): Parse ('P', length, name, query) carries the SQL once per connection;
 * afterwards Bind ('B', length, portal, name, ...) carries only the name. A trap on a statement's
 * SQL must also spring on a Bind of that statement.
 */
const PARSE_NAMED = /P[\s\S]{4}(cos_\d+)\0([^\0]*)\0/g;
const BIND_NAMED = /B[\s\S]{4}[^\0]*\0(cos_\d+)\0/g;

interface Link {
  readonly client: Socket;
  upstream: Socket | null;
}

export class TcpProxy {
  private mode: ProxyMode = 'pass';
  private readonly links = new Set<Link>();
  private server: Server | null = null;
  private trap: { pattern: RegExp; mode: 'cut' | 'blackhole'; sprung: () => void } | null = null;
  /** Connections accepted in total (a reconnecting service opens new ones). */
  accepted = 0;
  /** Bytes received from clients in total (whether forwarded or not): did the service talk at all? */
  bytesFromClients = 0;
  /** SQL of every named prepared statement seen in a Parse message (names are the same on every connection). */
  private readonly statements = new Map<string, string>();

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  get port(): number {
    const address = this.server?.address();
    if (address === null || address === undefined || typeof address === 'string') throw new Error('proxy not listening');
    return address.port;
  }

  get currentMode(): ProxyMode {
    return this.mode;
  }

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
    const link: Link = { client, upstream: null };
    this.links.add(link);
    client.setNoDelay(true);
    const drop = (): void => this.drop(link);
    client.on('error', drop);
    client.on('close', drop);
    if (this.mode === 'cut') {
      client.resetAndDestroy();
      return;
    }
    // In a blackhole the client's bytes are swallowed; the upstream is never reached.
    client.on('data', (chunk: Buffer) => {
      this.bytesFromClients += chunk.length;
      const trap = this.trap;
      const text = chunk.toString('latin1');
      for (const [, name, sql] of text.matchAll(PARSE_NAMED)) this.statements.set(name!, sql!);
      if (this.mode === 'pass' && trap !== null && this.matches(trap.pattern, text)) {
        // The matching message is not forwarded: the failure happens just before it.
        this.trap = null;
        trap.sprung();
        if (trap.mode === 'cut') this.cut();
        else this.blackhole();
        return;
      }
      if (this.mode === 'pass' && link.upstream !== null) link.upstream.write(chunk);
    });
    if (this.mode === 'blackhole') return;
    this.connectUpstream(link);
  }

  /** The chunk holds SQL matching `pattern`, or a Bind of a prepared statement whose SQL does. */
  private matches(pattern: RegExp, text: string): boolean {
    if (pattern.test(text)) return true;
    for (const [, name] of text.matchAll(BIND_NAMED)) {
      const sql = this.statements.get(name!);
      if (sql !== undefined && pattern.test(sql)) return true;
    }
    return false;
  }

  private connectUpstream(link: Link): void {
    const upstream = connect({ host: this.targetHost, port: this.targetPort });
    upstream.setNoDelay(true);
    link.upstream = upstream;
    // Bytes the client sent before the upstream connected are queued by the socket itself.
    upstream.on('data', (chunk) => {
      if (this.mode === 'pass') link.client.write(chunk);
    });
    const drop = (): void => this.drop(link);
    upstream.on('error', drop);
    upstream.on('close', drop);
  }

  private drop(link: Link): void {
    if (!this.links.delete(link)) return;
    if (!link.client.destroyed) link.client.destroy();
    if (link.upstream !== null && !link.upstream.destroyed) link.upstream.destroy();
  }

  private resetAll(): void {
    for (const link of [...this.links]) {
      this.links.delete(link);
      if (!link.client.destroyed) link.client.resetAndDestroy();
      if (link.upstream !== null && !link.upstream.destroyed) link.upstream.destroy();
    }
  }

  /**
   * Arms a trap: the first client message (e.g. a SQL statement) matching `pattern` is not
   * forwarded, and the proxy switches to `mode` at that instant, so a test can fail the database
   * in the middle of a transaction. Resolves when the trap is sprung.
   */
  failOn(pattern: RegExp, mode: 'cut' | 'blackhole'): Promise<void> {
    return new Promise<void>((resolve) => {
      this.trap = { pattern, mode, sprung: resolve };
    });
  }

  disarm(): void {
    this.trap = null;
  }

  /** Packets vanish from now on: open connections stall, new ones connect but get no answer. */
  blackhole(): void {
    this.mode = 'blackhole';
  }

  /** Every open connection is reset now and every new one is reset on arrival. */
  cut(): void {
    this.mode = 'cut';
    this.resetAll();
  }

  /** Back to normal; connections held by a blackhole are reset (the service must reconnect). */
  restore(): void {
    if (this.mode === 'blackhole') this.resetAll();
    this.mode = 'pass';
  }

  async close(): Promise<void> {
    this.mode = 'cut';
    this.resetAll();
    const server = this.server;
    this.server = null;
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
