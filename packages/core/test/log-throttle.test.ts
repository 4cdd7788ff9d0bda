/**
 * LogThrottle: the one "at most once per interval" of log lines (C-54's rule for log lines), on
 * the time its caller gives (core: the Clock port).
 */
import { expect } from 'chai';
import { LogThrottle } from '@cos/core';
import { FakeClock } from '@cos/core/testing';

describe('LogThrottle', () => {
  it('C-54: lets the first line through, holds back the rest of the interval, and reports how many were held back', () => {
    const clock = new FakeClock(new Date('2026-01-01T00:00:00Z'));
    const throttle = new LogThrottle(10_000, () => clock.now().getTime());
    expect(throttle.pass()).to.equal(0);
    clock.advance(9_999);
    expect(throttle.pass()).to.equal(null);
    expect(throttle.pass()).to.equal(null);
    clock.advance(1);
    expect(throttle.pass()).to.equal(2);
    expect(throttle.pass()).to.equal(null);
    clock.advance(10_000);
    expect(throttle.pass()).to.equal(1);
  });

  it('keeps one window per key', () => {
    let now = 0;
    const throttle = new LogThrottle(1_000, () => now);
    expect(throttle.pass('a')).to.equal(0);
    expect(throttle.pass('b')).to.equal(0);
    expect(throttle.pass('a')).to.equal(null);
    now = 1_000;
    expect(throttle.pass('b')).to.equal(0);
    expect(throttle.pass('a')).to.equal(1);
  });

  it('takes the time of the event when the caller has read it already', () => {
    const throttle = new LogThrottle(1_000, () => {
      throw new Error('the throttle read its own clock');
    });
    expect(throttle.pass('', 5_000)).to.equal(0);
    expect(throttle.pass('', 5_999)).to.equal(null);
    expect(throttle.pass('', 6_000)).to.equal(1);
  });
});
