/**
 * A held event loop, as a loaded machine makes one (a long turn, a GC pause, a descheduled process):
 * the test blocks its own loop synchronously while bytes arrive in its sockets, so that what the code
 * under test decides afterwards can be checked against what was already waiting. No sleeps: the hold
 * lasts at least its minimum, and then until a condition read from the kernel holds (bounded).
 */
import { readFileSync } from 'node:fs';

/**
 * Blocks the event loop for at least `minMs`, then until `until()` holds, `maxMs` in all at most.
 * Answers whether `until()` held when the hold ended.
 */
export function holdLoop(minMs: number, until: () => boolean = () => true, maxMs = 5_000): boolean {
  const started = performance.now();
  while (performance.now() - started < minMs);
  for (;;) {
    if (until()) return true;
    if (performance.now() - started >= maxMs) return false;
  }
}

/**
 * Whether a TCP connection of this machine to one of `ports` on the remote side has received bytes
 * its process has not read yet (the receive queue of /proc/net/tcp and tcp6, Linux). The process is
 * not told apart: give the ports of a server only the caller talks to (one a test started).
 */
export function bytesWaitingFrom(ports: readonly number[]): boolean {
  const wanted = new Set(ports);
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'latin1');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue …
      const fields = line.trim().split(/\s+/);
      if (fields.length < 5) continue;
      const remotePort = parseInt(fields[2]!.split(':').pop()!, 16);
      const receiveQueue = parseInt(fields[4]!.split(':')[1]!, 16);
      if (wanted.has(remotePort) && receiveQueue > 0) return true;
    }
  }
  return false;
}
