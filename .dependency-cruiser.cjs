/**
 * The dependency rule of docs/architecture.md ("The dependency rule"), checked on every `pnpm check` (and so in CI):
 *   core imports only zod and node: built-ins (core/src/testing may also use chai and mocha);
 *   inside core, domain/ imports no other layer, and ports/ import only domain/;
 *   adapters (store-sql, limiter-redis, adapter-koa, webhook-sender) import core, never each other or the cli;
 *   only the cli composes everything;
 *   test-support (test helpers shared by several packages' tests) imports only node: built-ins, and
 *   only test code imports it.
 */
const ADAPTERS = '(store-sql|limiter-redis|adapter-koa|webhook-sender)';
module.exports = {
  forbidden: [
    {
      name: 'core-imports-only-zod-and-node',
      comment: 'packages/core/src (outside testing/) may import only zod, node: built-ins and its own files.',
      severity: 'error',
      from: { path: '^packages/core/src', pathNot: '^packages/core/src/testing/' },
      to: {
        pathNot: ['^packages/core/src/', '(^|/)node_modules/zod/', '^node:'],
        dependencyTypesNot: ['core'],
      },
    },
    {
      name: 'core-domain-is-the-ground',
      comment:
        "core's domain/ is the ground floor: it imports nothing of ports/, access/, operations/, workers/ or testing/ (what it needs of a port, such as Random, it defines itself).",
      severity: 'error',
      from: { path: '^packages/core/src/domain/' },
      to: { path: '^packages/core/src/(ports|access|operations|workers|testing)/' },
    },
    {
      name: 'core-ports-import-only-domain',
      comment: "core's ports/ describe what the core needs from outside in the domain's words: they import only domain/ and each other (types).",
      severity: 'error',
      from: { path: '^packages/core/src/ports/' },
      to: { path: '^packages/core/src/', pathNot: '^packages/core/src/(ports|domain)/' },
    },
    {
      name: 'core-testing-imports',
      comment: 'core/testing may add chai, mocha and fast-check to what core may import.',
      severity: 'error',
      from: { path: '^packages/core/src/testing/' },
      to: {
        pathNot: ['^packages/core/src/', '(^|/)node_modules/(zod|chai|mocha|fast-check)/', '^node:'],
        dependencyTypesNot: ['core'],
      },
    },
    {
      name: 'core-forbidden-frameworks',
      comment: 'Belt and braces: core never reaches koa, knex, redis, inversify, pino or any adapter.',
      severity: 'error',
      from: { path: '^packages/core/' },
      to: { path: ['(^|/)node_modules/(koa|@koa|knex|redis|@redis|inversify|pino|pg|better-sqlite3|standardwebhooks)/', `^packages/(cli|${ADAPTERS.slice(1, -1)})/`] },
    },
    {
      name: 'adapters-depend-only-on-core',
      comment: 'An adapter implements core ports; it never imports another adapter or the cli.',
      severity: 'error',
      from: { path: `^packages/${ADAPTERS}/` },
      to: { path: `^packages/(cli|${ADAPTERS.slice(1, -1)})/`, pathNot: `^packages/$1/` },
    },
    {
      name: 'no-deep-imports-into-core',
      comment: 'Outside core, import "@cos/core", "@cos/core/testing" or "@cos/core/testing/contracts", never core/src/... files.',
      severity: 'error',
      from: { path: '^packages/(cli|store-sql|limiter-redis|adapter-koa|webhook-sender)/src/' },
      to: {
        path: '^packages/core/src/',
        pathNot: ['^packages/core/src/index\\.ts$', '^packages/core/src/testing/index\\.ts$', '^packages/core/src/testing/contracts/index\\.ts$'],
      },
    },
    {
      name: 'test-support-imports-only-node',
      comment:
        'packages/test-support may import only node: built-ins and its own files (the test runner and chai come from its callers); the run setup (lib/runner/) may also use pg, to create each parallel worker its own database.',
      severity: 'error',
      from: { path: '^packages/test-support/lib/' },
      to: { pathNot: ['^packages/test-support/lib/', '^node:', 'node_modules/pg/'], dependencyTypesNot: ['core'] },
    },
    {
      name: 'test-support-pg-only-in-runner',
      comment: 'Only the run setup (lib/runner/) uses pg; the helpers tests import stay on node: built-ins.',
      severity: 'error',
      from: { path: '^packages/test-support/lib/', pathNot: '^packages/test-support/lib/runner/' },
      to: { path: 'node_modules/pg/' },
    },
    {
      name: 'test-support-only-from-tests',
      comment: 'Shipped code (packages/*/src) never imports @cos/test-support; tests do.',
      severity: 'error',
      from: { path: '^packages/[^/]+/src/' },
      to: { path: '^packages/test-support/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // node_modules is not followed but stays in the graph: excluding it too would hide every import
    // that resolves into it, so core importing a hoisted package such as chai would pass.
    exclude: { path: '(^|/)dist/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.base.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['source', 'import', 'types', 'default'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'],
    },
  },
};
