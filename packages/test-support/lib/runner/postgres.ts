/**
 * Creates the parallel test run's per-worker Postgres databases: `<database>_w0`, `<database>_w1`,
 * … beside the one TEST_DATABASE_URL names, each created when missing and kept for the next run
 * (every suite works in schemas or databases of its own inside it and drops them).
 */
import pg from 'pg';

/** `name`: the base of the names, by default the database `url` names (the one connected to). */
export async function createDatabases(url: string, count: number, name = decodeURIComponent(new URL(url).pathname.slice(1)) || 'postgres'): Promise<string[]> {
  const names = Array.from({ length: count }, (_, i) => `${name}_w${i}`);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname = ANY($1)', [names]);
    const present = new Set(rows.map((r) => r.datname));
    for (const db of names.filter((n) => !present.has(n))) {
      try {
        await client.query(`CREATE DATABASE "${db.replaceAll('"', '""')}"`);
      } catch (err) {
        // Another run beside this one created it meanwhile.
        if ((err as { code?: string }).code !== '42P04') throw err;
      }
    }
  } finally {
    await client.end();
  }
  return names.map((db) => {
    const u = new URL(url);
    u.pathname = `/${encodeURIComponent(db)}`;
    return u.toString();
  });
}
