/** One page of a list, before presentation: `nextCursor` is null on the last page (C-6). */
export interface Page<T> {
  readonly items: readonly T[];
  readonly nextCursor: string | null;
}
