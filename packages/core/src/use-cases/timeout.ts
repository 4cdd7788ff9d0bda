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
