/**
 * Which real infrastructure a suite may use. Suites that need Postgres or Redis skip only when the
 * variable is unset AND CI is not 'true'; under CI=true a missing URL fails loudly (common rules).
 */
export const IN_CI = process.env.CI === 'true';

function required(name: string): string | undefined {
  const value = process.env[name];
  if (value !== undefined && value !== '') return value;
  if (IN_CI) throw new Error(`${name} must be set when CI=true: this suite may not skip in CI`);
  return undefined;
}

/** TEST_DATABASE_URL, or undefined (caller skips) outside CI. Throws under CI=true when unset. */
export function postgresUrl(): string | undefined {
  return required('TEST_DATABASE_URL');
}

/** TEST_REDIS_URL, or undefined (caller skips or spawns its own server) outside CI. */
export function redisUrl(): string | undefined {
  return required('TEST_REDIS_URL');
}

/** A positive integer from the environment, or the default. */
export function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  return n;
}
