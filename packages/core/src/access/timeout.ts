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
 * Calls still unanswered at their deadline are resolved as 'timeout' by one shared sweep that runs
 * every `ms / 5` ms while calls are pending, so a timeout may come up to a fifth of `ms` late.
 */
export class BoundedCalls {
  private readonly pending = new Set<{ readonly deadline: number; readonly resolve: (outcome: Bounded<never>) => void }>();
  private sweeper: NodeJS.Timeout | null = null;

  constructor(private readonly ms: number) {}

  run<T>(work: () => Promise<T>): Promise<Bounded<T>> {
    let started: Promise<T>;
    try {
      started = work();
    } catch (error) {
      return Promise.resolve({ kind: 'error', error });
    }
    return new Promise<Bounded<T>>((resolve) => {
      const call = { deadline: performance.now() + this.ms, resolve: resolve as (outcome: Bounded<never>) => void };
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

  private sweep(): void {
    const now = performance.now();
    for (const call of this.pending) {
      if (call.deadline > now) continue;
      this.pending.delete(call);
      call.resolve({ kind: 'timeout' });
    }
    if (this.pending.size === 0 && this.sweeper !== null) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }
}
