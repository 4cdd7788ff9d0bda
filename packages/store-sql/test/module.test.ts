/** sqlStoreModule: an inversify 8 ContainerModule binding the core's tokens without decorator metadata. */
import { TOKENS, type HealthProbe, type Stores, type UnitOfWork } from '@cos/core';
import { CapturingLogger } from '@cos/core/testing';
import { type SqlStore } from '@cos/store-sql';
import { SQL_STORE, sqlStoreModule } from '@cos/store-sql/module';
import { expect } from 'chai';
import { Container } from 'inversify';
import { organisation } from './support/fixtures.js';

describe('sqlStoreModule', () => {
  it('binds SQL_STORE and the core TOKENS.Stores, TOKENS.UnitOfWork, TOKENS.HealthProbe to one store', async () => {
    const container = new Container();
    await container.load(sqlStoreModule({ databaseUrl: 'sqlite::memory:' }));
    const store = container.get<SqlStore>(SQL_STORE);
    expect(container.get<SqlStore>(SQL_STORE), 'a singleton').to.equal(store);
    expect(container.get<Stores>(TOKENS.Stores)).to.equal(store.stores);
    expect(container.get<UnitOfWork>(TOKENS.UnitOfWork)).to.equal(store.unitOfWork);
    expect(container.get<HealthProbe>(TOKENS.HealthProbe)).to.equal(store.health);
    expect(await store.migrate()).to.deep.equal(['0001_initial', '0002_leaked_keys', '0003_key_lifecycle', '0004_operator_audit']);
    const o = organisation();
    await container.get<Stores>(TOKENS.Stores).organisations.create(o);
    expect((await store.stores.organisations.findById(o.id))?.id).to.equal(o.id);
    await container.unbindAllAsync();
    let error: unknown;
    try {
      await store.health.ping();
    } catch (e) {
      error = e;
    }
    expect(error, 'unbinding closed the pool').to.be.instanceOf(Error);
  });

  it("uses the container's TOKENS.Logger for the store's warnings when the config names none", async () => {
    const logger = new CapturingLogger();
    const container = new Container();
    container.bind(TOKENS.Logger).toConstantValue(logger);
    await container.load(sqlStoreModule({ databaseUrl: 'postgres://postgres@127.0.0.1:1/test' }));
    const store = container.get<SqlStore>(SQL_STORE);
    try {
      await store.health.ping();
    } catch {
      // expected: unreachable
    }
    expect(logger.entries.map((e) => [e.level, e.message])).to.deep.include(['warn', 'SQL store unavailable']);
    await container.unbindAllAsync();
  });
});
