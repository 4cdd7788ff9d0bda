/**
 * The read fast path of a SQLite file (sqlite/read-cache.ts, sqlite/reader.ts): `apiKeys.findCredential` and
 * `organisations.findById` outside a unit of work run on a read-only connection of their own. They
 * must see every committed write at once (C-36), never a unit of work's uncommitted one, and inside a
 * unit of work the transaction's own connection (its own writes) is still used.
 */
import { UnavailableError } from '@cos/core';
import { expect } from 'chai';
import { at, issuedKey, organisation } from './support/fixtures.js';
import { useSqliteFiles } from './support/sqlite-files.js';
import { storePorts } from '@cos/core/testing/contracts';

describe('SQLite file: the read-only connection of the hot reads', function () {
  this.timeout(20_000);
  const { file, storeOn } = useSqliteFiles('cos-store-sql-reader-');
  let n = 0;

  /** A migrated file with an organisation and one active key, and a store whose fast path is open. */
  async function fixture() {
    n += 1;
    const url = `sqlite:${file(`reader-${n}.sqlite`)}`;
    const store = storeOn(url);
    await store.migrate();
    const org = organisation();
    await store.stores.organisations.create(org);
    const { key } = issuedKey(org.id);
    await store.stores.apiKeys.insert(key);
    // The first read goes through the pool and opens the read connection; later ones use it.
    expect(await store.stores.apiKeys.findCredential(key.digest)).to.not.equal(null);
    expect(await store.stores.organisations.findById(org.id)).to.not.equal(null);
    return { url, store, org, key };
  }

  it('C-36: a key revoked through the store is found revoked by the very next findCredential', async () => {
    const { store, org, key } = await fixture();
    expect(await storePorts(store).apiKeys.revoke(org.id, key.id, at(1000))).to.equal(true);
    const found = await store.stores.apiKeys.findCredential(key.digest);
    expect(found?.key.revokedAt?.getTime()).to.equal(at(1000).getTime());
    expect(found?.organisation).to.deep.equal(org);
  });

  it('C-36: a key revoked through a unit of work is found revoked right after the commit', async () => {
    const { store, org, key } = await fixture();
    await store.unitOfWork.changeCredentials([org.id], (tx) => tx.apiKeys.revoke(org.id, key.id, at(2000)));
    expect((await store.stores.apiKeys.findCredential(key.digest))?.key.revokedAt?.getTime()).to.equal(at(2000).getTime());
  });

  it('C-36: a key revoked through a second store on the same file is found revoked by the first store at once; an organisation renamed there too', async () => {
    const { url, store, org, key } = await fixture();
    const other = storeOn(url);
    expect(await storePorts(other).apiKeys.revoke(org.id, key.id, at(3000))).to.equal(true);
    expect((await store.stores.apiKeys.findCredential(key.digest))?.key.revokedAt?.getTime()).to.equal(at(3000).getTime());
    await storePorts(other).organisations.update(org.id, { name: 'Renamed Ltd', updatedAt: at(3000) });
    expect((await store.stores.organisations.findById(org.id))?.name).to.equal('Renamed Ltd');
  });

  it("C-40: outside a unit of work the reads see only committed data (not the open unit of work's writes) and do not wait for it; inside it they see its own writes", async () => {
    const { store, org, key } = await fixture();
    const { key: added } = issuedKey(org.id);
    await store.unitOfWork.changeCredentials([org.id], async (tx) => {
      await tx.apiKeys.revoke(org.id, key.id, at(4000));
      await tx.apiKeys.insert(added);
      await tx.organisations.update(org.id, { name: 'Uncommitted Ltd', updatedAt: at(4000) });
      // Own writes, on the transaction's connection.
      expect((await tx.apiKeys.findCredential(key.digest))?.key.revokedAt?.getTime()).to.equal(at(4000).getTime());
      expect((await tx.apiKeys.findCredential(added.digest))?.key.id).to.equal(added.id);
      expect((await tx.organisations.findById(org.id))?.name).to.equal('Uncommitted Ltd');
      // The outer stores: the committed state, answered while the transaction holds the pool's only connection.
      expect((await store.stores.apiKeys.findCredential(key.digest))?.key.revokedAt).to.equal(null);
      expect(await store.stores.apiKeys.findCredential(added.digest)).to.equal(null);
      expect((await store.stores.organisations.findById(org.id))?.name).to.equal(org.name);
    });
    expect((await store.stores.apiKeys.findCredential(key.digest))?.key.revokedAt?.getTime()).to.equal(at(4000).getTime());
    expect((await store.stores.apiKeys.findCredential(added.digest))?.key.id).to.equal(added.id);
    expect((await store.stores.organisations.findById(org.id))?.name).to.equal('Uncommitted Ltd');
  });

  it('a rolled-back unit of work leaves nothing for the fast path to see', async () => {
    const { store, org, key } = await fixture();
    const boom = new Error('rolled back on purpose');
    let caught: unknown;
    try {
      await store.unitOfWork.changeCredentials([org.id], async (tx) => {
        await tx.apiKeys.revoke(org.id, key.id, at(5000));
        throw boom;
      });
    } catch (e) {
      caught = e;
    }
    expect(caught).to.equal(boom);
    expect((await store.stores.apiKeys.findCredential(key.digest))?.key.revokedAt).to.equal(null);
  });

  it('unknown digests and ids are null on the fast path as on the pool path', async () => {
    const { store } = await fixture();
    expect(await store.stores.apiKeys.findCredential('0'.repeat(64))).to.equal(null);
    expect(await store.stores.organisations.findById(organisation().id)).to.equal(null);
  });

  it('before migrating, the reads fail as before (no fast path is opened on a file without tables); after migrating they work', async () => {
    n += 1;
    const store = storeOn(`sqlite:${file(`unmigrated-${n}.sqlite`)}`);
    let caught: unknown;
    try {
      await store.stores.apiKeys.findCredential('0'.repeat(64));
    } catch (e) {
      caught = e;
    }
    expect(String((caught as Error | undefined)?.message)).to.match(/no such table/);
    await store.migrate();
    const org = organisation();
    await store.stores.organisations.create(org);
    const { key } = issuedKey(org.id);
    await store.stores.apiKeys.insert(key);
    for (let i = 0; i < 3; i += 1) expect((await store.stores.apiKeys.findCredential(key.digest))?.key.id).to.equal(key.id);
  });

  it('C-17: after close() the reads fail with UnavailableError, as on the pool path', async () => {
    const { store, org, key } = await fixture();
    await store.close();
    for (const read of [() => store.stores.apiKeys.findCredential(key.digest), () => store.stores.organisations.findById(org.id)]) {
      let caught: unknown;
      try {
        await read();
      } catch (e) {
        caught = e;
      }
      expect(caught).to.be.an.instanceOf(UnavailableError);
    }
  });
});
