/**
 * The one line a command prints when its credential change is refused by the fence (C-64): a
 * Redis whose replicas did not confirm the change is named as such, not as unreachable.
 */
import { expect } from 'chai';
import { FENCE_UNAVAILABLE_MESSAGE, UnavailableError } from '@cos/core';
import { RedisCounterError } from '@cos/limiter-redis';
import { describeError } from '../src/errors.js';

describe('cli: messages of a refused credential change', () => {
  it('C-64: replicas that did not confirm the change are named, with "nothing was changed"; an unreachable Redis keeps its line', () => {
    const notReplicated = new RedisCounterError('not-replicated', 'redis credential freshness: 0 of 1 replica(s) of 127.0.0.1:6379 acknowledged the change within 150 ms (a failover could lose it)');
    expect(describeError(new UnavailableError(FENCE_UNAVAILABLE_MESSAGE, { cause: notReplicated, reason: 'credential_fence' }))).to.equal(
      'redis credential freshness: 0 of 1 replica(s) of 127.0.0.1:6379 acknowledged the change within 150 ms (a failover could lose it): the change is refused; nothing was changed',
    );
    const down = new RedisCounterError('not-connected', 'redis rate counter: not connected to 127.0.0.1:6379');
    expect(describeError(new UnavailableError(FENCE_UNAVAILABLE_MESSAGE, { cause: down, reason: 'credential_fence' }))).to.match(/^Redis \(REDIS_URL\) is unreachable/);
  });

  it('a refused credential change is recognised by its reason, not by its sentence', () => {
    const down = new RedisCounterError('not-connected', 'redis rate counter: not connected to 127.0.0.1:6379');
    expect(describeError(new UnavailableError('worded otherwise', { cause: down, reason: 'credential_fence' }))).to.match(/^Redis \(REDIS_URL\) is unreachable/);
    const database = new UnavailableError(FENCE_UNAVAILABLE_MESSAGE, { cause: new Error('connect ECONNREFUSED 10.0.0.5:5432') });
    expect(database.reason).to.equal('store');
    expect(describeError(database)).to.equal('the database is unavailable (connect ECONNREFUSED 10.0.0.5:5432); check DATABASE_URL and that the database is up');
  });
});
