/**
 * Load generators. runLoad: a steady rate, `ratePerSecond` requests per second on a fixed schedule
 * (open model: a slow service does not slow the arrivals), with a cap on requests in flight so a hung
 * service shows up as rejections, not as an unbounded pile of sockets. closedLoad: a fixed number of
 * request loops per instance of the service, each sending its next request once the last answered,
 * until stopped (what a test of "every request sent after the change" watches).
 */
import type { LoopHoldUps } from '@cos/test-support/deadline';
import { sleep } from './free-port.js';
import type { Incoming, Outgoing, Client } from './http.js';

export interface Sample {
  readonly at: number;
  readonly label: string;
  readonly status: number;
  readonly elapsedMs: number;
  /**
   * Of elapsedMs, the time this process's event loop was held up (LoopHoldUps; 0 without one): the
   * service and the client share the loop, so elapsedMs - heldUpMs is what the request spent waiting.
   */
  readonly heldUpMs: number;
  readonly limit: number | null;
  readonly remaining: number | null;
  readonly error?: string;
}

export interface Planned {
  readonly label: string;
  readonly request: Outgoing;
  readonly onResponse?: (r: Incoming) => void;
}

export interface LoadOptions {
  readonly client: Client;
  readonly ratePerSecond: number;
  readonly durationMs: number;
  readonly maxInFlight?: number;
  /** The next request to send (its label is for reports). */
  readonly next: (i: number) => Planned;
  readonly onSample?: (s: Sample) => void;
  /** performance.now() value that sample times are relative to (default: the start of the load). */
  readonly origin?: number;
  /** Measures each sample's heldUpMs. */
  readonly holdUps?: LoopHoldUps;
}

export interface LoadResult {
  readonly sent: number;
  readonly skipped: number;
  readonly samples: Sample[];
}

function numberHeader(r: Incoming, name: string): number | null {
  const v = r.headers.get(name);
  return v === null ? null : Number(v);
}

export async function runLoad(o: LoadOptions, keepSamples = true): Promise<LoadResult> {
  const samples: Sample[] = [];
  const maxInFlight = o.maxInFlight ?? 200;
  const started = performance.now();
  const origin = o.origin ?? started;
  const inFlight = new Set<Promise<void>>();
  let sent = 0;
  let skipped = 0;
  const intervalMs = 1000 / o.ratePerSecond;
  for (let i = 0; ; i += 1) {
    const due = started + i * intervalMs;
    if (due - started >= o.durationMs) break;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    if (inFlight.size >= maxInFlight) {
      skipped += 1;
      continue;
    }
    const { label, request, onResponse } = o.next(i);
    sent += 1;
    const at = performance.now() - origin;
    const heldUpAtSend = o.holdUps?.heldUpMs() ?? 0;
    const heldUp = (): number => (o.holdUps?.heldUpMs() ?? 0) - heldUpAtSend;
    const p = o.client
      .send(request)
      .then(
        (r) => {
          onResponse?.(r);
          return { at, label, status: r.status, elapsedMs: r.elapsedMs, heldUpMs: heldUp(), limit: numberHeader(r, 'x-ratelimit-limit'), remaining: numberHeader(r, 'x-ratelimit-remaining') };
        },
        (e: unknown) => ({ at, label, status: 0, elapsedMs: performance.now() - origin - at, heldUpMs: heldUp(), limit: null, remaining: null, error: (e as Error).message }),
      )
      .then((s: Sample) => {
        if (keepSamples) samples.push(s);
        o.onSample?.(s);
      });
    const tracked = p.finally(() => inFlight.delete(tracked));
    inFlight.add(tracked);
  }
  await Promise.all(inFlight);
  return { sent, skipped, samples };
}

/** A request of a closedLoad: the instance it went to, when it was sent, its status (0: no answer) and what `note` took from the answer. */
export type LoadShot<I extends string, N extends object = object> = {
  readonly instance: I;
  readonly sentAt: number;
  readonly status: number;
  readonly elapsedMs: number;
} & Partial<N>;

export interface ClosedLoad<I extends string, N extends object> {
  /** Every request so far, in the order the answers came. */
  readonly shots: LoadShot<I, N>[];
  /** Ends every loop once its request in flight is answered. */
  stop(): Promise<void>;
}

/** `loops` loops on each of `instances`, each sending `send(instance)` again as soon as it is answered, until stop(). */
export function closedLoad<I extends string, N extends object = object>(instances: readonly I[], loops: number, send: (instance: I) => Promise<Incoming>, note?: (r: Incoming) => N): ClosedLoad<I, N> {
  const shots: LoadShot<I, N>[] = [];
  let running = true;
  const loop = async (instance: I): Promise<void> => {
    while (running) {
      const sentAt = performance.now();
      try {
        const r = await send(instance);
        shots.push({ instance, sentAt, status: r.status, elapsedMs: r.elapsedMs, ...note?.(r) } as LoadShot<I, N>);
      } catch {
        shots.push({ instance, sentAt, status: 0, elapsedMs: performance.now() - sentAt } as LoadShot<I, N>);
      }
    }
  };
  const all = instances.flatMap((i) => Array.from({ length: loops }, () => loop(i)));
  return {
    shots,
    async stop() {
      running = false;
      await Promise.all(all);
    },
  };
}

/** Waits until each of `instances` has answered `n` of `shots` with 200 (their caches are warm); fails after 5 s. */
export async function untilEachAnswered200<I extends string>(shots: readonly LoadShot<I>[], instances: readonly I[], n: number): Promise<void> {
  const deadline = performance.now() + 5_000;
  while (instances.some((i) => shots.filter((s) => s.instance === i && s.status === 200).length < n)) {
    if (performance.now() > deadline) throw new Error(`no ${n} 200s on every instance: ${JSON.stringify(shots.slice(-6))}`);
    await sleep(5);
  }
}
