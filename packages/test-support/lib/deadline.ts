/**
 * "It ended within its bound", measured against the event loop instead of the wall clock.
 *
 * A bound asserted on wall time (`elapsed < timeout + margin`) fails when the test process itself is
 * held up: on a loaded machine one stall of the loop longer than the margin makes a correct bound look
 * broken. What these tests mean is "the call ended no later than its own timer": so the helpers arm a
 * probe timer of the same duration right after the call has armed its own, and ask whether the call
 * had ended when the probe fired. Node fires timers of one duration in the order they were armed and
 * runs promise reactions between two timers' callbacks, so a call ended by a timer armed before the
 * probe has always ended when the probe fires, however late both fire; a call that waited longer than
 * its bound has not.
 */

export interface Probed<T> {
  /** What the call resolved to, or the reason it rejected. */
  readonly outcome: PromiseSettledResult<T>;
  /** True when the call had settled before a timer of `boundMs`, armed right after it started, fired. */
  readonly withinBound: boolean;
  /** Wall time from start to settlement (informational: it includes whatever held the process up). */
  readonly elapsedMs: number;
}

/**
 * Starts `call` (which arms its own timers synchronously, before returning its promise), then arms a
 * probe timer of `boundMs`; resolves once the call has settled. `boundMs` 0 asks "did it settle
 * without waiting for a timer" (Node runs a 0 ms timer after 1 ms), i.e. from a failure known at once.
 */
export function probeBound<T>(call: () => Promise<T>, boundMs: number): Promise<Probed<T>> {
  const started = performance.now();
  let probeFired = false;
  let pending: Promise<T>;
  try {
    pending = call();
  } catch (error) {
    pending = Promise.reject(error);
  }
  const probe = setTimeout(() => {
    probeFired = true;
  }, boundMs);
  const settle = (outcome: PromiseSettledResult<T>): Probed<T> => {
    const withinBound = !probeFired;
    clearTimeout(probe);
    return { outcome, withinBound, elapsedMs: performance.now() - started };
  };
  return pending.then(
    (value) => settle({ status: 'fulfilled', value }),
    (reason: unknown) => settle({ status: 'rejected', reason }),
  );
}

/** The wall times of the probed calls that ended after their bound (empty when all were within it). */
export function overBound(results: readonly Pick<Probed<unknown>, 'withinBound' | 'elapsedMs'>[]): number[] {
  return results.filter((r) => !r.withinBound).map((r) => Math.round(r.elapsedMs));
}

/**
 * How long the process could not run its timers: a ticker of `periodMs` adds up how late each tick
 * fired. The difference of two readings of `heldUpMs()` is the time the event loop was held up
 * between them, by the machine or by the process's own work, to within a period. A request timed
 * from the same process spends its wall time either held up that way or waiting with the loop
 * free; only the second can be waiting on a dependency, so "wall time minus held-up time" is what a
 * bound on waiting checks, on an idle machine or a loaded one alike.
 */
export class LoopHoldUps {
  #total = 0;
  #last = performance.now();
  readonly #timer: NodeJS.Timeout;

  constructor(readonly periodMs = 5) {
    this.#timer = setInterval(() => {
      const now = performance.now();
      this.#total += Math.max(0, now - this.#last - periodMs);
      this.#last = now;
    }, periodMs);
    this.#timer.unref();
  }

  /** The running total in ms, the tick now overdue included. */
  heldUpMs(): number {
    return this.#total + Math.max(0, performance.now() - this.#last - this.periodMs);
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
