/** Source of randomness, injected by the composition root. Defined with the domain, which mints keys, secrets and ids from it. */
export type { Random } from '../domain/random.js';
