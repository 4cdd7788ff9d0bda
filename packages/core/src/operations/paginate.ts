import type { KeysetPosition, PageRequest } from '../ports/pagination.js';
import { encodeCursor } from '../validation/cursor.js';
import type { ListQuery } from '../validation/query.js';
import type { Page } from './page.js';

/**
 * One keyset page (C-6, C-7): asks the store for limit + 1 rows to learn whether another page
 * follows; the next cursor is the position of the last returned item, null on the last page.
 */
export async function paginate<T>(
  query: ListQuery,
  fetch: (page: PageRequest) => Promise<T[]>,
  positionOf: (item: T) => KeysetPosition,
): Promise<Page<T>> {
  const rows = await fetch({ limit: query.limit + 1, after: query.after });
  const items = rows.slice(0, query.limit);
  const last = items[items.length - 1];
  const nextCursor = rows.length > query.limit && last !== undefined ? encodeCursor(positionOf(last)) : null;
  return { items, nextCursor };
}
