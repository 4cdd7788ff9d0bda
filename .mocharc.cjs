// One mocha run over every package: tests import packages by name and run the TypeScript
// sources directly (tsx + the "source" export condition), so no build is needed to test.
module.exports = {
  'node-option': ['import=tsx', 'conditions=source'],
  timeout: 20000,
  recursive: true,
  exit: true,
};
