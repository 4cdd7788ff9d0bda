/** The contract suites run against the in-memory implementations (the SQL and Redis packages run the same suites). */
import { InProcessRateCounter } from '@cos/core';
import { createInMemoryStore, InMemoryRateCounter } from '@cos/core/testing';
import { describeRateCounter, describeStoreContract } from '@cos/core/testing/contracts';

describeStoreContract('in-memory', async () => createInMemoryStore());

describeRateCounter('in-process (InProcessRateCounter)', async () => ({
  counter: new InProcessRateCounter(),
  close: async () => undefined,
}));

describeRateCounter('in-memory (InMemoryRateCounter)', async () => ({
  counter: new InMemoryRateCounter(),
  close: async () => undefined,
}));
