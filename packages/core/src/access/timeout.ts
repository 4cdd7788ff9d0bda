/** A bounded wait: the outcome of `work` or 'timeout' after `ms`, whichever comes first. Never rejects. */
export type Bounded<T> =
  | { readonly kind: 'value'; readonly value: T }
  | { readonly kind: 'error'; readonly error: unknown }
  | { readonly kind: 'timeout' };

export async function withTimeout<T>(work: () => Promise<T>, ms: number): Promise<Bounded<T>> {
  let timer: NodeJS.Timeout | undefined;
  let started: Promise<Bounded<T>>;
  try {
    started = work().then(
      (value): Bounded<T> => ({ kind: 'value', value }),
      (error: unknown): Bounded<T> => ({ kind: 'error', error }),
    );
  } catch (error) {
    return { kind: 'error', error };
  }
  const expired = new Promise<Bounded<T>>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'timeout' }), Math.max(0, ms));
    timer.unref();
  });
  try {
    return await Promise.race([started, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * withTimeout for a hot path: the same outcomes, but one promise per call and no timer of its own.
 * One shared sweep runs every `ms / 5` ms while calls are pending and marks the calls past their
 * deadline; they are resolved as 'timeout' in the check phase that follows (`setImmediate`), after
 * the event loop's poll phase has read every socket that was ready. So a reply that was already
 * waiting when the deadline was found passed (the loop was held: a long turn, a GC pause, a
 * descheduled process) is read first and wins, and only a reply that had not arrived when the loop
 * next looked counts as late. A timeout may come up to a fifth of `ms`, plus one loop turn, late.
 */
interface BoundedCall {
  readonly deadline: number;
  readonly resolve: (outcome: Bounded<never>) => void;
  /** Past its deadline at a sweep: timed out in the next check phase unless answered in the poll phase before it. */
  overdue: boolean;
}

export class BoundedCalls {
  private readonly pending = new Set<BoundedCall>();
  private sweeper: NodeJS.Timeout | null = null;
  /** The check-phase callback that times out the overdue calls still unanswered. */
  private verdict: NodeJS.Immediate | null = null;

  constructor(private readonly ms: number) {}

  run<T>(work: () => Promise<T>): Promise<Bounded<T>> {
    let started: Promise<T>;
    try {
      started = work();
    } catch (error) {
      return Promise.resolve({ kind: 'error', error });
    }
    return new Promise<Bounded<T>>((resolve) => {
      const call: BoundedCall = { deadline: performance.now() + this.ms, resolve: resolve as (outcome: Bounded<never>) => void, overdue: false };
      this.pending.add(call);
      if (this.sweeper === null) {
        this.sweeper = setInterval(() => this.sweep(), Math.max(1, Math.floor(this.ms / 5)));
        this.sweeper.unref();
      }
      started.then(
        (value) => {
          if (this.pending.delete(call)) resolve({ kind: 'value', value });
        },
        (error: unknown) => {
          if (this.pending.delete(call)) resolve({ kind: 'error', error });
        },
      );
    });
  }

  /** Timers phase: marks the calls past their deadline and leaves the verdict to the check phase. */
  private sweep(): void {
    const now = performance.now();
    for (const call of this.pending) {
      // Deadlines are a constant `ms` after each call, so the set's order is the deadlines' order.
      if (call.deadline > now) break;
      call.overdue = true;
    }
    if (this.pending.size === 0) {
      if (this.sweeper !== null) clearInterval(this.sweeper);
      this.sweeper = null;
      return;
    }
    if (this.verdict === null && this.pending.values().next().value?.overdue === true) this.verdict = setImmediate(() => this.timeOutOverdue());
  }

  /** Check phase: every overdue call the poll phase before did not answer is late. */
  private timeOutOverdue(): void {
    this.verdict = null;
    for (const call of this.pending) {
      if (!call.overdue) break;
      this.pending.delete(call);
      call.resolve({ kind: 'timeout' });
    }
  }
}
