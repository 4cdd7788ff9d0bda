// One mocha run over every package: tests import packages by name and run the TypeScript
// sources directly (tsx + the "source" export condition), so no build is needed to test.
//
// Files run in parallel workers (most of the suite waits on sockets, timers and child processes,
// not on the CPU, so more workers than cores pay off). Each worker has its own Postgres database,
// Redis server and topology ports (packages/test-support/lib/runner/setup.ts); the run ends with
// the skipped suites and why, and the tests that used more than a third of their timeout.
// COS_TEST_JOBS overrides the number of workers; `--no-parallel` runs one file after another.
const { availableParallelism } = require('node:os');

const jobs = Number(process.env.COS_TEST_JOBS) || Math.max(2, availableParallelism() * 2);
process.env.COS_TEST_JOBS = String(jobs);

module.exports = {
  'node-option': ['import=tsx', 'conditions=source'],
  require: ['./packages/test-support/lib/runner/setup.ts'],
  timeout: 20000,
  recursive: true,
  exit: true,
  // One job is the serial run (mocha's parallel mode with one worker loads the files differently).
  parallel: jobs > 1,
  ...(jobs > 1 ? { jobs } : {}),
};
