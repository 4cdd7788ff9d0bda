/**
 * Contract suite of InstanceRegistry (C-57): caching instances record themselves and their Redis
 * (never credentials), refresh the row, remove it on a clean shutdown; operator commands record
 * their changes in flight and read the live rows, judged by the registry's own clock only.
 */
import { expect } from 'chai';
import type { InstanceRegistry } from '../../ports/instance-registry.js';

export interface InstanceRegistryHarness {
  /** An empty registry whose clock is the wall clock's pace (the suite waits real milliseconds). */
  readonly registry: InstanceRegistry;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function describeInstanceRegistry(name: string, factory: () => Promise<InstanceRegistryHarness>): void {
  describe(`InstanceRegistry contract: ${name}`, () => {
    let harness: InstanceRegistryHarness;
    let registry: InstanceRegistry;

    beforeEach(async () => {
      harness = await factory();
      registry = harness.registry;
    });
    afterEach(async () => {
      await harness.close();
    });

    it('a heartbeat records the instance and its Redis location and auth flag; a second one refreshes it (started_at kept)', async () => {
      expect(await registry.live(30_000)).to.deep.equal([]);
      await registry.heartbeat({ instanceId: 'i-1', redisLocation: 'redis://cache.internal:6379/0', redisAuth: true });
      const [first] = await registry.live(30_000);
      expect(first).to.include({ instanceId: 'i-1', redisLocation: 'redis://cache.internal:6379/0', redisAuth: true });
      expect(first!.heartbeatAt).to.equal(first!.startedAt);
      expect(first!.ageMs).to.be.within(0, 5_000);
      await sleep(5);
      await registry.heartbeat({ instanceId: 'i-1', redisLocation: 'redis://cache.internal:6379/0', redisAuth: true });
      await registry.heartbeat({ instanceId: 'i-2', redisLocation: 'rediss://other:6380/2', redisAuth: false });
      const rows = await registry.live(30_000);
      expect(rows.map((r) => [r.instanceId, r.redisLocation, r.redisAuth])).to.deep.equal([
        ['i-1', 'redis://cache.internal:6379/0', true],
        ['i-2', 'rediss://other:6380/2', false],
      ]);
      expect(rows[0]!.startedAt).to.equal(first!.startedAt);
      expect(rows[0]!.heartbeatAt).to.be.greaterThan(first!.heartbeatAt);
    });

    it('a row is live only while its heartbeat is younger than the bound (the registry clock); remove() and prune() delete rows', async () => {
      await registry.heartbeat({ instanceId: 'i-1', redisLocation: 'redis://127.0.0.1:6379/0', redisAuth: false });
      await sleep(60);
      expect(await registry.live(30_000), 'within the bound').to.have.length(1);
      expect(await registry.live(20), 'older than the bound').to.deep.equal([]);
      await registry.prune(20);
      expect(await registry.live(30_000), 'pruned').to.deep.equal([]);
      await registry.heartbeat({ instanceId: 'i-2', redisLocation: 'redis://127.0.0.1:6379/0', redisAuth: false });
      await registry.prune();
      expect(await registry.live(30_000), 'prune() keeps the living').to.have.length(1);
      await registry.remove('i-2');
      expect(await registry.live(30_000)).to.deep.equal([]);
    });

    it("C-111: a heartbeat records the identity read from the instance's Redis; one without an identity keeps the recorded one, a new one replaces it", async () => {
      await registry.heartbeat({ instanceId: 'i-1', redisLocation: 'redis://127.0.0.1:6379/0', redisAuth: false });
      expect((await registry.live(30_000))[0]).to.include({ instanceId: 'i-1', redisIdentity: null });
      await registry.heartbeat({ instanceId: 'i-1', redisLocation: 'redis://127.0.0.1:6379/0', redisAuth: false, redisIdentity: 'id-a' });
      expect((await registry.live(30_000))[0]).to.include({ redisIdentity: 'id-a' });
      await registry.heartbeat({ instanceId: 'i-1', redisLocation: 'redis://127.0.0.1:6379/0', redisAuth: false, redisIdentity: null });
      expect((await registry.live(30_000))[0], 'an unreadable identity keeps the recorded one').to.include({ redisIdentity: 'id-a' });
      await registry.heartbeat({ instanceId: 'i-1', redisLocation: 'redis://127.0.0.1:6379/0', redisAuth: false, redisIdentity: 'id-b' });
      expect((await registry.live(30_000))[0], 'a Redis restarted empty: its new identity').to.include({ redisIdentity: 'id-b' });
    });

    it("an operator command's change in flight is a writer row: counted while live, never listed as a caching instance, gone at endWrite()", async () => {
      expect(await registry.writesInFlight(30_000)).to.equal(0);
      await registry.beginWrite('w-1');
      await registry.beginWrite('w-2');
      await registry.heartbeat({ instanceId: 'i-1', redisLocation: 'redis://127.0.0.1:6379/0', redisAuth: false });
      expect(await registry.writesInFlight(30_000)).to.equal(2);
      expect((await registry.live(30_000)).map((r) => r.instanceId)).to.deep.equal(['i-1']);
      await registry.remove('w-1'); // remove() is for instances only
      expect(await registry.writesInFlight(30_000)).to.equal(2);
      await registry.endWrite('w-1');
      expect(await registry.writesInFlight(30_000)).to.equal(1);
      await registry.endWrite('i-1'); // endWrite() is for writers only
      expect(await registry.live(30_000), 'endWrite() leaves instances').to.have.length(1);
      await sleep(60);
      expect(await registry.writesInFlight(20), 'older than the bound: a command that died').to.equal(0);
    });
  });
}
