/**
 * The instance registry (migration 0005_instance_registry) on every dialect: the InstanceRegistry
 * contract, judged by the database's clock only.
 */
import { describeInstanceRegistry } from '@cos/core/testing/contracts';
import { SqlInstanceRegistry } from '@cos/store-sql';
import { forEachTarget } from './support/targets.js';

forEachTarget('instance registry', (target) => {
  describeInstanceRegistry(`@cos/store-sql ${target.name}`, async () => {
    const store = await target.open();
    await store.query('DELETE FROM instance_registry'); // a target may share one schema between tests
    return { registry: new SqlInstanceRegistry(store), close: () => store.close() };
  });
});
