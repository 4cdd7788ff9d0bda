/**
 * The shared counter store's key names (counter-keys.ts): an organisation's freshness keys and the
 * data-loss markers of its Redis Cluster hash slot, so that no call touches a global key.
 */
import { expect } from 'chai';
import { counterKey, freshnessKeys, keySlot } from '@cos/core';

describe('counter key names: one slot per organisation, nothing global', () => {
  it("keySlot is Redis Cluster's (CRC16-XMODEM of the hash tag, mod 16384): the values CLUSTER KEYSLOT answers", () => {
    expect(keySlot('foo')).to.equal(12182);
    expect(keySlot('{user1000}.following')).to.equal(keySlot('{user1000}.followers'));
    expect(keySlot('{user1000}.following')).to.equal(3443);
    expect(keySlot('123456789')).to.equal(0x31c3);
    expect(keySlot('rl:{org:x}:cc:token')).to.equal(keySlot('org:x'));
  });

  it("an organisation's token, changes and counters share its hash tag; its data-loss markers are its slot's, whatever prefix goes in front", () => {
    for (const id of ['7b0c9a52-2f5e-4c41-9d43-1f6f3e0b8a10', 'a', 'ü-org']) {
      const keys = freshnessKeys(id);
      expect(keys.token).to.equal(`{org:${id}}:cc:token`);
      expect(keys.changes).to.equal(`{org:${id}}:cc:changes`);
      expect(keys.alive).to.match(/^\{cc[0-9a-z]+\}:cc:alive$/);
      expect(keys.unsettled).to.equal(keys.alive.replace(':cc:alive', ':cc:unsettled'));
      const slot = keySlot(keys.token);
      for (const k of [keys.changes, keys.alive, keys.unsettled, counterKey(`org:${id}`, 0)]) {
        expect(keySlot(`rl:${k}`), k).to.equal(slot);
      }
    }
  });
});
