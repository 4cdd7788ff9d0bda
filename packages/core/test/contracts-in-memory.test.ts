/** The contract suites run against the in-memory implementations (the SQL and Redis packages run the same suites). */
import { InProcessRateCounter } from '@cos/core';
import { createInMemoryStore, InMemoryFreshCounter, InMemoryInstanceRegistry, InMemoryRateCounter, StaticHostResolver } from '@cos/core/testing';
import { describeCredentialFreshness, describeInstanceRegistry, describeRateCounter, describeStoreContract, describeWebhookHostResolver } from '@cos/core/testing/contracts';

describeStoreContract('in-memory', async () => createInMemoryStore());

describeRateCounter('in-process (InProcessRateCounter)', async () => ({
  counter: new InProcessRateCounter(),
  close: async () => undefined,
}));

describeRateCounter('in-memory (InMemoryRateCounter)', async () => ({
  counter: new InMemoryRateCounter(),
  close: async () => undefined,
}));

describeRateCounter('in-memory shared counter store (InMemoryFreshCounter)', async () => ({
  counter: new InMemoryFreshCounter(),
  close: async () => undefined,
}));

describeCredentialFreshness('in-memory (InMemoryFreshCounter)', async () => {
  const shared = new InMemoryFreshCounter(undefined, 300);
  return { first: shared, second: shared, changeBoundMs: 300, flush: async () => shared.flush(), close: async () => undefined };
});

describeWebhookHostResolver('StaticHostResolver (a hosts table)', () => new StaticHostResolver({ localhost: ['127.0.0.1', '::1'] }));

describeInstanceRegistry('in-memory (InMemoryInstanceRegistry)', async () => ({ registry: new InMemoryInstanceRegistry(), close: async () => undefined }));
