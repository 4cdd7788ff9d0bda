/** Answers whether the store serves a trivial query (C-4). Rejects or never settles when it does not. */
export interface HealthProbe {
  ping(): Promise<void>;
}
