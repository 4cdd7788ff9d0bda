/**
 * The test proxy itself, against a local TCP server the test owns (no Postgres needed): what the
 * outage suites of store-sql and system-tests rely on, checked without them.
 */
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import { TcpProxy } from '@cos/test-support/tcp-proxy';

/** A server that records what it receives per connection and answers `pong` to `ping`. */
class Upstream {
  readonly sockets: Socket[] = [];
  readonly received: string[] = [];
  readonly closed: Socket[] = [];
  private constructor(readonly server: Server) {}

  static async start(): Promise<Upstream> {
    const server = createServer();
    const upstream = new Upstream(server);
    server.on('connection', (socket) => {
      upstream.sockets.push(socket);
      socket.on('data', (chunk: Buffer) => {
        upstream.received.push(chunk.toString('latin1'));
        if (chunk.toString('latin1') === 'ping') socket.write('pong');
      });
      socket.on('error', () => undefined);
      socket.on('close', () => upstream.closed.push(socket));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return upstream;
  }

  get port(): number {
    return (this.server.address() as { port: number }).port;
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

interface Client {
  readonly socket: Socket;
  data: string;
  closedBy: 'reset' | 'end' | null;
}

async function dial(port: number): Promise<Client> {
  const socket = connect(port, '127.0.0.1');
  const client: Client = { socket, data: '', closedBy: null };
  socket.on('data', (chunk: Buffer) => (client.data += chunk.toString('latin1')));
  socket.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'ECONNRESET') client.closedBy = 'reset';
  });
  socket.on('close', () => (client.closedBy ??= 'end'));
  await once(socket, 'connect');
  return client;
}

async function until(check: () => boolean, what: string, withinMs = 2_000): Promise<void> {
  const started = Date.now();
  while (!check()) {
    if (Date.now() - started > withinMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const settle = (ms = 100): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A Postgres frontend message: type byte, Int32 length (itself included), body. */
function message(type: string, ...fields: (string | Buffer)[]): Buffer {
  const body = Buffer.concat(fields.map((f) => (typeof f === 'string' ? Buffer.from(f, 'latin1') : f)));
  const length = Buffer.alloc(4);
  length.writeInt32BE(body.length + 4);
  return Buffer.concat([Buffer.from(type, 'latin1'), length, body]);
}
const NO_PARAMS = Buffer.from([0, 0]);
const parse = (name: string, sql: string): Buffer => message('P', `${name}\0${sql}\0`, NO_PARAMS);
/** Bind of statement `name` to the unnamed portal, no parameters, no result formats. */
const bind = (name: string): Buffer => message('B', `\0${name}\0`, NO_PARAMS, NO_PARAMS, NO_PARAMS);

describe('@cos/test-support: the TCP proxy of the outage tests', () => {
  let upstream: Upstream;
  let proxy: TcpProxy;
  const clients: Client[] = [];
  const open = async (): Promise<Client> => {
    const c = await dial(proxy.port);
    clients.push(c);
    return c;
  };

  beforeEach(async () => {
    upstream = await Upstream.start();
    proxy = await new TcpProxy('127.0.0.1', upstream.port).listen();
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.socket.destroy();
    await proxy.close();
    await upstream.stop();
  });

  it('pass: bytes flow both ways; connections and client bytes are counted; urlFor points a URL at the proxy', async () => {
    const c = await open();
    c.socket.write('ping');
    await until(() => c.data === 'pong', 'the answer');
    expect(upstream.received.join('')).to.equal('ping');
    expect(proxy.accepted).to.equal(1);
    expect(proxy.bytesFromClients).to.equal(4);
    expect(proxy.openConnections).to.equal(1);
    expect(proxy.currentMode).to.equal('pass');
    expect(proxy.urlFor('postgres://u:p@db.example:5432/cos?x=1')).to.equal(`postgres://u:p@127.0.0.1:${proxy.port}/cos?x=1`);
    c.socket.end();
    await until(() => upstream.closed.length === 1, 'the close to reach the server');
  });

  it('redirect: new connections reach the other server; connections already open stay with the first', async () => {
    const other = await Upstream.start();
    try {
      const before = await open();
      before.socket.write('ping');
      await until(() => before.data === 'pong', 'the first answer');
      proxy.redirect('127.0.0.1', other.port);
      const after = await open();
      after.socket.write('ping');
      await until(() => after.data === 'pong', 'the answer through the redirect');
      before.socket.write('again');
      await until(() => upstream.received.join('') === 'pingagain', 'the open connection still on the first server');
      expect(other.received.join('')).to.equal('ping');
      expect(before.closedBy).to.equal(null);
    } finally {
      await other.stop();
    }
  });

  it('blackhole: bytes vanish both ways, nothing is reset, a close does not reach the other side (partition); restore closes held connections on both sides', async () => {
    const c = await open();
    c.socket.write('ping');
    await until(() => c.data === 'pong', 'the answer');
    proxy.blackhole();
    c.socket.write('ping');
    upstream.sockets[0]!.write('unsolicited');
    await settle();
    expect(c.data, 'nothing reaches the client').to.equal('pong');
    expect(upstream.received.join(''), 'nothing reaches the server').to.equal('ping');
    expect(proxy.bytesFromClients, 'swallowed bytes still count').to.equal(8);
    expect(c.closedBy).to.equal(null);
    // the client gives up: the server does not learn of it while the network is down
    c.socket.destroy();
    await settle();
    expect(upstream.closed, 'the server session stays').to.have.length(0);
    // a connection made during the blackhole never reaches the server
    const late = await open();
    late.socket.write('ping');
    await settle();
    expect(upstream.sockets).to.have.length(1);
    expect(proxy.openConnections).to.equal(2);
    proxy.restore();
    await until(() => upstream.closed.length === 1 && late.closedBy !== null, 'restore to close the held connections');
    expect(late.closedBy).to.equal('reset');
    expect(proxy.openConnections).to.equal(0);
    const after = await open();
    after.socket.write('ping');
    await until(() => after.data === 'pong', 'the answer after restore');
  });

  it('cut: open connections are reset at once and new ones on arrival; restore lets new ones through', async () => {
    const c = await open();
    proxy.cut();
    await until(() => c.closedBy !== null, 'the reset');
    expect(c.closedBy).to.equal('reset');
    // a new connection is reset on arrival (the reset may even beat the client's own 'connect')
    const refused = connect(proxy.port, '127.0.0.1');
    const [error] = (await once(refused, 'error')) as [NodeJS.ErrnoException];
    expect(error.code).to.equal('ECONNRESET');
    expect(upstream.sockets).to.have.length(1);
    proxy.restore();
    const again = await open();
    again.socket.write('ping');
    await until(() => again.data === 'pong', 'the answer after restore');
  });

  for (const mode of ['blackhole', 'cut'] as const) {
    it(`failOn(…, '${mode}'): the first message matching is swallowed and the proxy switches to ${mode}; earlier traffic passed`, async () => {
      const c = await open();
      const sprung = proxy.failOn(/INSERT INTO audit_entries/i, mode);
      c.socket.write('SELECT 1');
      await until(() => upstream.received.join('') === 'SELECT 1', 'the statement before the trap');
      c.socket.write('INSERT INTO audit_entries VALUES (1)');
      await sprung;
      expect(proxy.currentMode).to.equal(mode);
      await settle();
      expect(upstream.received.join(''), 'the matching message was not forwarded').to.equal('SELECT 1');
    });
  }

  it("failOn springs on a Bind of a named prepared statement whose SQL matches (Parse came earlier on that connection), not on another connection's name, nor on a 'P' inside SQL text", async () => {
    const c = await open();
    const other = await open();
    // 'UPDATE' holds a 'P' followed by four characters: it must not pass for a Parse naming " api_keys ..."
    c.socket.write(Buffer.concat([parse('cos_1', 'INSERT INTO audit_entries (id) VALUES ($1)'), parse('cos_2', 'UPDATE api_keys SET revoked_at = $1'), bind('cos_1')]));
    other.socket.write(parse('cos_1', 'SELECT 1'));
    await until(() => upstream.received.length === 2, 'both connections to reach the server');
    const sprung = proxy.failOn(/INSERT INTO audit_entries/i, 'blackhole');
    other.socket.write(bind('cos_1')); // on this connection cos_1 is SELECT 1
    c.socket.write(bind('cos_2'));
    await until(() => upstream.received.length === 4, 'the non-matching Binds to pass');
    expect(proxy.currentMode).to.equal('pass');
    c.socket.write(bind('cos_1'));
    await sprung;
    expect(proxy.currentMode).to.equal('blackhole');
    await settle();
    expect(upstream.received, 'the matching Bind was swallowed').to.have.length(4);
  });

  it('watch records the SQL of every matching message until stopped (a Parse, a Bind of a matching statement), not other statements, and forwards everything', async () => {
    const c = await open();
    c.socket.write(parse('cos_1', 'SELECT * FROM api_keys WHERE digest = $1'));
    await until(() => upstream.received.length === 1, 'the Parse before the watch');
    const watch = proxy.watch(/FROM api_keys/);
    c.socket.write(Buffer.concat([parse('cos_2', 'UPDATE instances SET lease = $1'), bind('cos_2')]));
    await until(() => upstream.received.length === 2, 'an unrelated statement');
    expect(watch.seen, 'an unrelated statement is not recorded').to.deep.equal([]);
    c.socket.write(bind('cos_1'));
    await until(() => upstream.received.length === 3, 'the Bind of the watched statement');
    expect(watch.seen).to.deep.equal(['SELECT * FROM api_keys WHERE digest = $1']);
    watch.stop();
    c.socket.write(bind('cos_1'));
    await until(() => upstream.received.length === 4, 'a Bind after stop()');
    expect(watch.seen, 'nothing recorded after stop()').to.have.length(1);
    expect(proxy.currentMode).to.equal('pass');
  });

  it('disarm: an armed trap no longer springs; close resets every connection', async () => {
    const c = await open();
    let sprung = false;
    void proxy.failOn(/ping/, 'cut').then(() => (sprung = true));
    proxy.disarm();
    c.socket.write('ping');
    await until(() => c.data === 'pong', 'the answer');
    expect(sprung).to.equal(false);
    await proxy.close();
    await until(() => c.closedBy !== null, 'close to reset the connection');
    expect(c.closedBy).to.equal('reset');
  });

  it('TcpProxy.for: a listening proxy in front of the server a URL names (default port when the URL has none)', async () => {
    const viaUrl = await TcpProxy.for(`redis://127.0.0.1:${upstream.port}`, 6379);
    try {
      const c = await dial(viaUrl.port);
      clients.push(c);
      c.socket.write('ping');
      await until(() => c.data === 'pong', 'the answer');
    } finally {
      await viaUrl.close();
    }
  });
});
