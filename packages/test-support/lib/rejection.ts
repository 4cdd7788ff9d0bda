/** Awaits `promise`, which must reject, and returns what it rejected with; throws when it resolves. */
export async function rejection(promise: PromiseLike<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a rejection');
}
