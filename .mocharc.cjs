// One mocha run over every package: tests import packages by name and run the TypeScript
// sources directly (tsx + the "source" export condition), so no build is needed to test.
//
// Files run in parallel workers, one per core: the suite is CPU-bound on a small machine, and with
// more workers than cores the latency-bound tests (the soak, the outage bounds) measured the
// overloaded machine instead of the service (docs/decisions/0012-parallel-test-run.md). Each worker has its own Postgres database,
// Redis server and topology ports (packages/test-support/lib/runner/setup.ts); the run ends with
// the skipped suites and why, and the tests that used more than a third of their timeout.
// COS_TEST_JOBS overrides the number of workers; `--no-parallel` runs one file after another.
const { availableParallelism } = require('node:os');

const jobs = Number(process.env.COS_TEST_JOBS) || Math.max(2, availableParallelism());
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
