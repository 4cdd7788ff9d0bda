/**
 * The hot path's connection to one Redis (not a cluster): a small RESP2 client of its own, so that
 * the calls the core sends in a check phase are written to the socket in that same turn (C-203).
 * node-redis writes what it is given in a `setImmediate` of its own; called from the core's
 * check-phase batch, that write would wait for the next loop turn, behind the next poll phase's
 * requests. Here a command is encoded at once and every command of one synchronous run goes out in
 * one `socket.write` on the `process.nextTick` that follows it (before any other immediate or I/O).
 *
 * It does what the hot path needs and nothing more: EVALSHA of the adapter's scripts (EVAL when
 * Redis answers NOSCRIPT: after a restart or SCRIPT FLUSH, which also caches the script again), and
 * single commands (TIME). AUTH and SELECT from the URL, TLS for `rediss:`. Like the node-redis
 * connections (connection.ts): no offline queue (a command while not ready rejects at once), a bound
 * on the commands waiting for replies, reconnecting forever with the same backoff, and 'ready' and
 * 'error' events. A dropped connection rejects every command waiting on it.
 */
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { SCRIPTS, type CheckReply } from './scripts.js';

/** An error reply of Redis (`-ERR …`). */
class RespReplyError extends Error {
  override readonly name = 'RespReplyError';
}

type Reply = string | number | null | RespReplyError | Reply[];

interface Pending {
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
  /** The EVAL form of an EVALSHA (encoded only when needed), sent instead when Redis answers NOSCRIPT. */
  readonly fallback: (() => string) | null;
}

interface RespOptions {
  readonly connectTimeoutMs: number;
  readonly maxPending: number;
  readonly reconnectDelayMs: (retries: number) => number;
}

/** One RESP2 array of bulk strings. */
function encode(args: readonly string[]): string {
  let out = `*${args.length}\r\n`;
  for (const arg of args) out += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
  return out;
}

const CR = 13;
const KEEP_ALIVE_MS = 30_000;

/**
 * One reply starting at `at` in `buf`, with where it ends; undefined while it has not fully arrived.
 */
function parse(buf: Buffer, at: number): { value: Reply; end: number } | undefined {
  if (at >= buf.length) return undefined;
  const lineEnd = buf.indexOf(CR, at);
  if (lineEnd === -1 || lineEnd + 1 >= buf.length) return undefined;
  const type = buf[at];
  const line = buf.toString('utf8', at + 1, lineEnd);
  const next = lineEnd + 2;
  switch (type) {
    case 0x2b: // +
      return { value: line, end: next };
    case 0x2d: // -
      return { value: new RespReplyError(line), end: next };
    case 0x3a: // :
      return { value: Number(line), end: next };
    case 0x24: {
      // $
      const length = Number(line);
      if (length < 0) return { value: null, end: next };
      if (next + length + 2 > buf.length) return undefined;
      return { value: buf.toString('utf8', next, next + length), end: next + length + 2 };
    }
    case 0x2a: {
      // *
      const count = Number(line);
      if (count < 0) return { value: null, end: next };
      const items: Reply[] = [];
      let end = next;
      for (let i = 0; i < count; i++) {
        const item = parse(buf, end);
        if (item === undefined) return undefined;
        items.push(item.value);
        end = item.end;
      }
      return { value: items, end };
    }
    default:
      throw new RespReplyError(`unexpected reply type ${String.fromCharCode(type ?? 0)}`);
  }
}

export class RespConnection {
  readonly isCluster = false;
  readonly #url: URL;
  readonly #options: RespOptions;
  #socket: Socket | null = null;
  #ready = false;
  #started = false;
  #closed = false;
  #retries = 0;
  #reconnect: NodeJS.Timeout | null = null;
  /** Commands written and waiting for their reply, oldest first (from #head). */
  #pending: Pending[] = [];
  #head = 0;
  /** Encoded commands not written yet (written on the next tick). */
  #out = '';
  #flushScheduled = false;
  /** Received bytes of a reply not complete yet. */
  #rest: Buffer | null = null;
  readonly #listeners = { ready: new Set<(arg?: unknown) => void>(), error: new Set<(arg?: unknown) => void>() };
  #drained: (() => void) | null = null;

  constructor(url: string, options: RespOptions) {
    this.#url = new URL(url);
    this.#options = options;
  }

  get isReady(): boolean {
    return this.#ready && !this.#closed;
  }

  get isOpen(): boolean {
    return this.#started && !this.#closed;
  }

  /** Starts connecting (and reconnecting) in the background; resolves once ready, and never rejects. */
  connect(): Promise<void> {
    this.#started = true;
    return new Promise((resolve) => {
      const onReady = (): void => {
        this.#listeners.ready.delete(onReady);
        resolve();
      };
      this.#listeners.ready.add(onReady);
      this.#open();
    });
  }

  on(event: 'error' | 'ready', listener: (arg?: unknown) => void): void {
    this.#listeners[event].add(listener);
  }

  off(event: 'ready', listener: () => void): void {
    this.#listeners[event].delete(listener);
  }

  hit(key: string, ttlMs: number, deadlineMs: number, n: number): Promise<number> {
    return this.#script(SCRIPTS.hit, [key], [String(ttlMs), String(deadlineMs), String(n)]).then(Number);
  }

  freshness(keys: readonly string[], args: readonly string[]): Promise<CheckReply> {
    return this.#script(SCRIPTS.freshness, keys, args) as Promise<CheckReply>;
  }

  guardedHit(keys: readonly string[], args: readonly string[]): Promise<readonly number[] | number> {
    return this.#script(SCRIPTS.guardedHit, keys, args).then((reply) => (Array.isArray(reply) ? reply.map(Number) : Number(reply)));
  }

  guardedFreshness(keys: readonly string[], args: readonly string[]): Promise<CheckReply> {
    return this.#script(SCRIPTS.guardedFreshness, keys, args) as Promise<CheckReply>;
  }

  beginChange(keys: readonly string[], args: readonly string[]): Promise<number> {
    return this.#script(SCRIPTS.beginChange, keys, args).then(Number);
  }

  endChange(keys: readonly string[], args: readonly string[]): Promise<number> {
    return this.#script(SCRIPTS.endChange, keys, args).then(Number);
  }

  command(_key: string | undefined, args: readonly string[]): Promise<unknown> {
    return this.#send(encode(args), null);
  }

  /** Waits for the replies still due, then closes the socket; no reconnect after it. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#stopReconnecting();
    const socket = this.#socket;
    if (socket === null) return;
    if (this.#head < this.#pending.length) await new Promise<void>((resolve) => (this.#drained = resolve));
    await new Promise<void>((resolve) => {
      socket.once('close', () => resolve());
      socket.end();
    });
  }

  destroy(): void {
    this.#closed = true;
    this.#stopReconnecting();
    this.#socket?.destroy();
    this.#dropped(new Error('redis connection destroyed'));
  }

  #script(script: { readonly SCRIPT: string | string[]; readonly SHA1: string }, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    const tail = [String(keys.length), ...keys, ...args];
    return this.#send(encode(['EVALSHA', script.SHA1, ...tail]), () => encode(['EVAL', Array.isArray(script.SCRIPT) ? script.SCRIPT.join('\n') : script.SCRIPT, ...tail]));
  }

  #send(encoded: string, fallback: (() => string) | null): Promise<unknown> {
    if (!this.isReady) return Promise.reject(new Error(this.#closed ? 'the redis connection is closed' : 'the redis connection is not ready'));
    if (this.#pending.length - this.#head >= this.#options.maxPending) return Promise.reject(new Error('too many redis commands waiting for a reply'));
    return new Promise((resolve, reject) => this.#queue(encoded, { resolve, reject, fallback }));
  }

  #queue(encoded: string, pending: Pending): void {
    this.#pending.push(pending);
    this.#out += encoded;
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      process.nextTick(() => this.#flush());
    }
  }

  #flush(): void {
    this.#flushScheduled = false;
    const out = this.#out;
    this.#out = '';
    if (out !== '' && this.#socket !== null && this.#socket.writable) this.#socket.write(out);
  }

  #open(): void {
    if (this.#closed) return;
    const url = this.#url;
    const host = url.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
    const port = Number(url.port || 6379);
    // TLS sends the host name for SNI, never an address (Node refuses an IP as ServerName).
    const socket: Socket = url.protocol === 'rediss:' ? tlsConnect({ host, port, ...(isIP(host) === 0 ? { servername: host } : {}) }) : netConnect({ host, port });
    this.#socket = socket;
    socket.setNoDelay(true);
    // As node-redis's sockets: TCP keep-alive probes after 30 s idle, so a vanished peer is noticed.
    socket.setKeepAlive(true, KEEP_ALIVE_MS);
    const timer = setTimeout(() => socket.destroy(new Error(`connection timeout after ${this.#options.connectTimeoutMs} ms`)), this.#options.connectTimeoutMs);
    socket.once(url.protocol === 'rediss:' ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      void this.#handshake(socket);
    });
    socket.on('data', (chunk: Buffer) => this.#received(chunk));
    socket.on('error', (error: Error) => {
      clearTimeout(timer);
      this.#emit('error', error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      if (this.#socket !== socket) return;
      this.#socket = null;
      this.#ready = false;
      this.#dropped(new Error('the redis connection was lost'));
      if (!this.#closed) this.#reconnect = setTimeout(() => this.#open(), this.#options.reconnectDelayMs(this.#retries++));
    });
  }

  /** AUTH and SELECT as the URL says, written before anything else; ready once they answered. */
  async #handshake(socket: Socket): Promise<void> {
    const steps: string[][] = [];
    const user = decodeURIComponent(this.#url.username);
    const password = decodeURIComponent(this.#url.password);
    // The user `default` when the URL names none, as node-redis's HELLO does (Redis 6 and later).
    if (password !== '') steps.push(['AUTH', user !== '' ? user : 'default', password]);
    const db = this.#url.pathname.replace(/^\//, '');
    if (db !== '' && db !== '0') steps.push(['SELECT', db]);
    try {
      await Promise.all(steps.map((args) => new Promise((resolve, reject) => this.#queue(encode(args), { resolve, reject, fallback: null }))));
    } catch (error) {
      this.#emit('error', error);
      socket.destroy();
      return;
    }
    if (this.#socket !== socket || this.#closed) return;
    this.#ready = true;
    this.#retries = 0;
    this.#emit('ready');
  }

  #received(chunk: Buffer): void {
    const buf = this.#rest === null ? chunk : Buffer.concat([this.#rest, chunk]);
    let at = 0;
    for (;;) {
      let parsed: ReturnType<typeof parse>;
      try {
        parsed = parse(buf, at);
      } catch (error) {
        this.#socket?.destroy(error as Error);
        return;
      }
      if (parsed === undefined) break;
      at = parsed.end;
      this.#answer(parsed.value);
    }
    this.#rest = at >= buf.length ? null : buf.subarray(at);
  }

  #answer(reply: Reply): void {
    const pending = this.#pending[this.#head];
    if (pending === undefined) return;
    this.#pending[this.#head++] = undefined as unknown as Pending;
    if (this.#head > 1024 && this.#head * 2 > this.#pending.length) {
      this.#pending = this.#pending.slice(this.#head);
      this.#head = 0;
    }
    if (reply instanceof RespReplyError) {
      if (pending.fallback !== null && reply.message.startsWith('NOSCRIPT')) this.#queue(pending.fallback(), { ...pending, fallback: null });
      else pending.reject(reply);
    } else {
      pending.resolve(reply);
    }
    if (this.#head >= this.#pending.length && this.#drained !== null) {
      const drained = this.#drained;
      this.#drained = null;
      drained();
    }
  }

  /** Rejects every command waiting on a connection that is gone. */
  #dropped(error: Error): void {
    const pending = this.#pending.slice(this.#head);
    this.#pending = [];
    this.#head = 0;
    this.#out = '';
    this.#rest = null;
    for (const p of pending) p.reject(error);
    const drained = this.#drained;
    this.#drained = null;
    drained?.();
  }

  #stopReconnecting(): void {
    if (this.#reconnect !== null) clearTimeout(this.#reconnect);
    this.#reconnect = null;
  }

  #emit(event: 'ready' | 'error', arg?: unknown): void {
    for (const listener of [...this.#listeners[event]]) listener(arg);
  }
}
