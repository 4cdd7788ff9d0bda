/**
 * The store writes its SQL with `?` placeholders (the form SQLite and knex take); Postgres numbers
 * them (`$1`, `$2`, …). The store's statements are constant texts whose values always travel as
 * bindings, so each text is rendered once and kept (`PlaceholderCache`).
 */

/**
 * `?` → `$1`, `$2`, … in order. A `?` inside a quoted literal or identifier ('…', "…") would be
 * ambiguous (knex escapes it as `\?`; the store never writes one), so it is refused.
 */
export function numberedPlaceholders(sql: string): string {
  let out = '';
  let n = 0;
  let quote: string | null = null;
  for (const ch of sql) {
    if (quote !== null) {
      if (ch === quote) quote = null;
      else if (ch === '?') throw new Error(`a '?' inside a quoted literal or identifier is ambiguous: ${sql}`);
      out += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
    } else if (ch === '?') {
      out += `$${++n}`;
    } else {
      out += ch;
    }
  }
  if (quote !== null) throw new Error(`unterminated quote in SQL: ${sql}`);
  return out;
}

/** Most distinct texts kept; beyond it (ad-hoc SQL through SqlStore.query) the cache starts again. */
const MAX_TEXTS = 1_000;

/** One rendering, and one prepared-statement name, per statement text. */
export class PlaceholderCache {
  private readonly texts = new Map<string, { readonly text: string; readonly name: string }>();
  private count = 0;

  /** `$n` text and a stable statement name (`cos_<n>`) for `sql`. */
  get(sql: string): { readonly text: string; readonly name: string } {
    let entry = this.texts.get(sql);
    if (entry === undefined) {
      if (this.texts.size >= MAX_TEXTS) this.texts.clear();
      entry = { text: numberedPlaceholders(sql), name: `cos_${++this.count}` };
      this.texts.set(sql, entry);
    }
    return entry;
  }
}
