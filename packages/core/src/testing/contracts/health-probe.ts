/** Contract suite of HealthProbe (C-4). */
import { expect } from 'chai';
import type { StoreHarness, StoreHarnessFactory } from '../harness.js';
import { newOrganisation } from './fixtures.js';

/** C-4: the probe must answer within the health timeout (1 s by default). */
const HEALTH_TIMEOUT_MS = 1000;

async function pingWithin(harness: StoreHarness, ms: number): Promise<number> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`ping did not settle within ${ms} ms`)), ms);
  });
  try {
    await Promise.race([harness.health.ping(), timeout]);
  } finally {
    clearTimeout(timer);
  }
  return performance.now() - started;
}

export function describeHealthProbe(name: string, factory: StoreHarnessFactory): void {
  describe(`HealthProbe contract: ${name}`, () => {
    let harness: StoreHarness;

    beforeEach(async () => {
      harness = await factory();
    });

    afterEach(async () => {
      await harness.close();
    });

    it('C-4: ping resolves on a healthy, empty store within 1 s', async () => {
      expect(await pingWithin(harness, HEALTH_TIMEOUT_MS)).to.be.below(HEALTH_TIMEOUT_MS);
    });

    it('C-4: ping resolves to nothing, repeatedly and concurrently, on a store with data', async () => {
      await harness.stores.organisations.create(newOrganisation());
      expect(await harness.health.ping()).to.equal(undefined);
      for (let i = 0; i < 5; i++) await pingWithin(harness, HEALTH_TIMEOUT_MS);
      await Promise.all(Array.from({ length: 10 }, () => pingWithin(harness, HEALTH_TIMEOUT_MS)));
    });
  });
}
