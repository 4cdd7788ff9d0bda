/**
 * A TCP proxy (node:net) between a store and the real Postgres, so a test can blackhole the network
 * without touching the server (C-17):
 *
 *  - pass       bytes flow both ways;
 *  - blackhole  bytes vanish both ways and nothing is reset: the store sees a server that never
 *               answers. As on a real partition, the server does not learn that the store closed its
 *               socket either (the FIN is lost): its session, with any open transaction and the row
 *               locks it holds, stays until the network returns.
 *
 * `restore()` goes back to pass; connections held through the blackhole are closed then on both sides
 * (as TCP would once packets flow again), so the server ends those sessions.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

interface Link {
  readonly client: Socket;
  /** Null for a connection accepted during a blackhole (its handshake never reaches the server). */
  readonly upstream: Socket | null;
  /** The link saw a blackhole: it is closed on restore. */
  held: boolean;
}

export class BlackholeProxy {
  private mode: 'pass' | 'blackhole' = 'pass';
  private readonly links = new Set<Link>();
  private server: Server | null = null;
  private trap: { pattern: RegExp; sprung: () => void } | null = null;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** `databaseUrl` with its host and port replaced by this proxy's. */
  urlFor(databaseUrl: string): string {
    const via = new URL(databaseUrl);
    via.hostname = '127.0.0.1';
    via.port = String(this.port);
    return via.toString();
  }

  get port(): number {
    const address = this.server?.address();
    if (address === null || address === undefined || typeof address === 'string') throw new Error('proxy not listening');
    return address.port;
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
    const upstream = this.mode === 'pass' ? connect({ host: this.targetHost, port: this.targetPort }) : null;
    const link: Link = { client, upstream, held: this.mode === 'blackhole' };
    this.links.add(link);
    client.setNoDelay(true);
    upstream?.setNoDelay(true);
    client.on('data', (chunk: Buffer) => {
      const trap = this.trap;
      if (this.mode === 'pass' && trap !== null && trap.pattern.test(chunk.toString('latin1'))) {
        // The matching message is swallowed: the network fails just before it.
        this.trap = null;
        this.blackhole();
        trap.sprung();
        return;
      }
      if (this.mode === 'pass') upstream?.write(chunk);
    });
    upstream?.on('data', (chunk: Buffer) => {
      if (this.mode === 'pass') client.write(chunk);
    });
    // While blackholed, a close on one side does not reach the other (it is part of the lost traffic).
    const closed = (): void => {
      if (link.held) return;
      this.links.delete(link);
      client.destroy();
      upstream?.destroy();
    };
    client.on('error', closed).on('close', closed);
    upstream?.on('error', closed).on('close', closed);
  }

  /** Packets vanish from now on, in both directions; nothing is reset. */
  blackhole(): void {
    this.mode = 'blackhole';
    for (const link of this.links) link.held = true;
  }

  /** The first client message matching `pattern` is swallowed and the proxy blackholes at that instant. */
  blackholeOn(pattern: RegExp): Promise<void> {
    return new Promise<void>((resolve) => {
      this.trap = { pattern, sprung: resolve };
    });
  }

  /** The network is back: connections held through the blackhole are closed on both sides. */
  restore(): void {
    this.trap = null;
    this.mode = 'pass';
    for (const link of [...this.links]) {
      if (!link.held) continue;
      this.links.delete(link);
      if (!link.client.destroyed) link.client.resetAndDestroy();
      link.upstream?.destroy();
    }
  }

  async close(): Promise<void> {
    this.blackhole();
    this.restore();
    const server = this.server;
    this.server = null;
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
