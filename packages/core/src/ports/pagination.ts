/** Keyset position: lists are ordered by (createdAt, id) ascending (C-6, C-7). */
export interface KeysetPosition {
  readonly createdAt: Date;
  readonly id: string;
}

/** Ask a store for at most `limit` records strictly after `after` (or from the start). */
export interface PageRequest {
  readonly limit: number;
  readonly after: KeysetPosition | null;
}
