/**
 * The dependency rule of ../shared/design/architecture.md, checked on every `pnpm check` (and so in CI):
 *   core imports only zod and node: built-ins (core/src/testing may also use chai and mocha);
 *   adapters (store-sql, limiter-redis, adapter-koa, webhook-sender) import core, never each other or the cli;
 *   only the cli composes everything.
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
      name: 'no-circular',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.base.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['source', 'import', 'types', 'default'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'],
    },
  },
};
