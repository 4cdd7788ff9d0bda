// `pnpm soak`: the long soak of packages/system-tests (5 minutes unless SOAK_SECONDS says otherwise)
// against Postgres (TEST_DATABASE_URL) and Redis (TEST_REDIS_URL, else a spawned redis-server).
// This file is evaluated before mocha spawns its worker, so the default reaches the test process.
process.env.SOAK_SECONDS ??= '300';
module.exports = {
  'node-option': ['import=tsx', 'conditions=source', 'expose-gc'],
  spec: ['packages/system-tests/test/soak/**/*.test.ts'],
  timeout: 0,
  exit: true,
};
