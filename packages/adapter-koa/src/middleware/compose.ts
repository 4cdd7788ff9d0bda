import type Koa from 'koa';

/** Koa-style composition of middleware, done once at construction (koa-compose semantics). */
export function compose(middleware: readonly Koa.Middleware[]): Koa.Middleware {
  return (ctx, next) => {
    let last = -1;
    const dispatch = (i: number): Promise<void> => {
      if (i <= last) return Promise.reject(new Error('next() called multiple times'));
      last = i;
      const fn = i === middleware.length ? next : middleware[i];
      if (fn === undefined) return Promise.resolve();
      try {
        return Promise.resolve(fn(ctx, () => dispatch(i + 1)));
      } catch (err) {
        return Promise.reject(err);
      }
    };
    return dispatch(0);
  };
}
