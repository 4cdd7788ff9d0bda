/** Wall clock. Use cases never call Date.now() themselves. */
export interface Clock {
  now(): Date;
}
