/**
 * The core's store contract suites (@cos/core/testing/contracts), unchanged, on every dialect: the in-memory
 * store and the SQL stores are held to the very same tests.
 */
import { describeStoreContract } from '@cos/core/testing/contracts';
import { forEachTarget } from './support/targets.js';

forEachTarget('store contract', (target) => {
  describeStoreContract(`@cos/store-sql ${target.name}`, () => target.open());
});
