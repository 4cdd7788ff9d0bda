/**
 * The parent side of sqlite-process.ts: another process on the same SQLite file, as `cos-admin …`
 * next to `cos-admin serve`. Its stdout is JSON lines; stdin carries the parent's lines.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { WriteCommand } from './store-writes.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const CHILD_SCRIPT = fileURLToPath(new URL('./sqlite-process.ts', import.meta.url));
const TSX_LOADER = import.meta.resolve('tsx');

export type Message = Record<string, unknown>;

/** A child process running support/sqlite-process.ts with `args` (see its usage). */
export class SqliteChild {
  private readonly process: ChildProcessWithoutNullStreams;
  private readonly messages: Message[] = [];
  private readonly waiters: Array<() => void> = [];
  private stderr = '';
  private requests = 0;
  readonly exited: Promise<number | null>;

  constructor(args: readonly string[]) {
    this.process = spawn(process.execPath, ['--import', TSX_LOADER, '--conditions=source', CHILD_SCRIPT, ...args], {
      cwd: ROOT,
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    this.process.stderr.setEncoding('utf8').on('data', (d: string) => (this.stderr += d));
    createInterface({ input: this.process.stdout }).on('line', (line) => {
      this.messages.push(JSON.parse(line) as Message);
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.exited = new Promise((resolve) =>
      this.process.on('exit', (code) => {
        for (const wake of this.waiters.splice(0)) wake();
        resolve(code);
      }),
    );
  }

  /** The first message that has `field`; fails on an {error} message or when the child exits first. */
  next(field: string): Promise<Message> {
    return this.nextWhere(`"${field}"`, (m) => field in m);
  }

  /** The first message `matches` accepts; fails on an {error} message or when the child exits first. */
  async nextWhere(what: string, matches: (m: Message) => boolean): Promise<Message> {
    for (;;) {
      const error = this.messages.find((m) => 'error' in m);
      if (error !== undefined) throw new Error(`child failed: ${String(error['error'])}\n${this.stderr}`);
      const found = this.messages.find(matches);
      if (found !== undefined) return found;
      if (this.process.exitCode !== null) throw new Error(`child exited (${this.process.exitCode}) before ${what}\n${this.stderr}`);
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  send(line: string): void {
    this.process.stdin.write(`${line}\n`);
  }

  /**
   * `serve` mode: the child runs the write (support/store-writes.ts) on its own store; resolves with
   * its answer once the child reports the write committed.
   */
  async write(command: WriteCommand): Promise<unknown> {
    this.requests += 1;
    const id = this.requests;
    this.send(JSON.stringify({ id, command }));
    return (await this.nextWhere(`the answer to write ${id}`, (m) => m['id'] === id && 'done' in m))['done'];
  }

  /** `serve` mode: no more writes; the child closes its store and exits. */
  end(): void {
    this.process.stdin.end();
  }

  kill(): void {
    if (this.process.exitCode === null) this.process.kill();
  }
}
