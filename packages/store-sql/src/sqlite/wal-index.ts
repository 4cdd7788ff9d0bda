/**
 * "Has any transaction committed to this SQLite file since then?", answered with one `pread` of the
 * WAL-index header at the start of the database's `-shm` file, for any connection in any process.
 *
 * The header is documented in SQLite's WAL format (https://www.sqlite.org/walformat.html, "The
 * WAL-Index Header"): two 48-byte copies of { iVersion (3007000), unused, iChange (incremented by
 * every transaction), isInit, bigEndCksum, szPage, mxFrame, nPage, aFrameCksum[2], aSalt[2],
 * aCksum[2] } in native byte order. A writer publishes a commit by writing copy 2, then (after a
 * memory barrier) copy 1; a reader only trusts the header when both copies are equal. The commit is
 * not visible to any reader before that, and the writer's COMMIT does not return before it.
 *
 * So: read both copies at once; a header is *consistent* when the copies are equal and it is
 * initialised with the known version. If two consistent reads are byte-for-byte equal, no
 * transaction became visible in between (iChange alone would differ; a WAL restart changes the
 * salts). A torn read during a commit has unequal copies, or differs from the earlier read, and is
 * treated as a change. Checkpoints write past the header and do not count as changes (they do not
 * change the content).
 *
 * The `-shm` file is the same memory every connection maps, so `pread` sees what they see. It is
 * only deleted when the last connection to the database closes, and the read-only connection that
 * owns this watch stays open for as long as the watch is used.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { endianness } from 'node:os';

const COPY_BYTES = 48;
const WAL_INDEX_VERSION = 3007000;
const IS_INIT_OFFSET = 12;

export class WalIndexWatch {
  private fd: number | null = null;
  /** Both copies, as last read. */
  private readonly both = Buffer.alloc(2 * COPY_BYTES);
  private readonly first = this.both.subarray(0, COPY_BYTES);
  private readonly second = this.both.subarray(COPY_BYTES);
  private readonly readVersion =
    endianness() === 'LE' ? (b: Buffer) => b.readUInt32LE(0) : (b: Buffer) => b.readUInt32BE(0);

  constructor(private readonly databaseFile: string) {}

  /** Opens `<database>-shm` read-only; false (and the watch stays unusable) when it cannot. */
  open(): boolean {
    if (this.fd !== null) return true;
    try {
      this.fd = openSync(`${this.databaseFile}-shm`, 'r');
    } catch {
      return false;
    }
    return this.read() !== null;
  }

  /**
   * The current header (a view into an internal buffer, valid until the next call) when it is
   * consistent, else null (not open, unreadable, a commit in progress, not a WAL index).
   */
  read(): Buffer | null {
    if (this.fd === null) return null;
    let n: number;
    try {
      n = readSync(this.fd, this.both, 0, this.both.length, 0);
    } catch {
      return null;
    }
    if (n !== this.both.length) return null;
    const header = this.first;
    if (this.readVersion(header) !== WAL_INDEX_VERSION || header[IS_INIT_OFFSET] !== 1) return null;
    return header.equals(this.second) ? header : null;
  }

  close(): void {
    const fd = this.fd;
    this.fd = null;
    if (fd !== null) closeSync(fd);
  }
}
