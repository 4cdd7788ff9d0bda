/**
 * probeBound, the event-loop-relative bound of the timing tests: it must hold for a call ended by its
 * own timer however long the process is held up, and must catch a call that waits past its bound.
 */
import { expect } from 'chai';
import { overBound, probeBound } from '../lib/deadline.js';

/** Keeps the event loop busy for `ms`: what a loaded machine does to a test process. */
function stallLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: no timer can fire meanwhile
  }
}

function endsAfter(ms: number): Promise<string> {
  return new Promise((resolve) => setTimeout(() => resolve('timed out'), ms));
}

describe('@cos/test-support: probeBound (bounds measured against the event loop)', () => {
  it('a call ended by its own timer of the bound is within it, even when the loop is stalled three times as long', async () => {
    const probed = probeBound(() => endsAfter(20), 20);
    stallLoop(60);
    const result = await probed;
    expect(result.outcome).to.deep.equal({ status: 'fulfilled', value: 'timed out' });
    expect(result.elapsedMs, 'the wall clock alone would call this late').to.be.at.least(60);
    expect(result.withinBound).to.equal(true);
  });

  it('a call that waits longer than its bound is caught, stalled or not', async () => {
    const quiet = await probeBound(() => endsAfter(60), 20);
    const stalled = probeBound(() => endsAfter(60), 20);
    stallLoop(30);
    expect([quiet.withinBound, (await stalled).withinBound]).to.deep.equal([false, false]);
    expect(overBound([quiet])).to.have.length(1);
  });

  it('bound 0: a failure known at once (a rejected promise, a throw) is within it; one that waits for a timer is not', async () => {
    const rejected = await probeBound(() => Promise.reject(new Error('not connected')), 0);
    expect(rejected.withinBound).to.equal(true);
    expect(rejected.outcome.status).to.equal('rejected');
    const thrown = await probeBound(() => {
      throw new Error('closed');
    }, 0);
    expect(thrown).to.include({ withinBound: true });
    expect((await probeBound(() => endsAfter(5), 0)).withinBound).to.equal(false);
  });
});
