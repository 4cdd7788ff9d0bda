/**
 * The one duration grammar and the one timestamp grammar of every `cos-admin` option (values.ts):
 * durations are whole numbers with units w, d, h, m, s, largest first, each once; zero only where
 * the option allows it; timestamps are a date (00:00 UTC) or a full RFC 3339 time with its offset.
 */
import { expect } from 'chai';
import { InvalidArgumentError } from 'commander';
import { parseDuration, parseTimestamp, pageSize, naceSection } from '../src/values.js';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const WEEK = 7 * DAY;

function refused(call: () => unknown): string {
  let thrown: unknown;
  try {
    call();
  } catch (e) {
    thrown = e;
  }
  expect(thrown, 'an InvalidArgumentError (commander: exit status 2, the option named)').to.be.instanceOf(InvalidArgumentError);
  return (thrown as Error).message;
}

describe('cos-admin option values: durations', () => {
  it('each unit alone, and combinations largest unit first', () => {
    expect(parseDuration('30s')).to.equal(30 * SECOND);
    expect(parseDuration('15m')).to.equal(15 * MINUTE);
    expect(parseDuration('12h')).to.equal(12 * HOUR);
    expect(parseDuration('7d')).to.equal(7 * DAY);
    expect(parseDuration('2w')).to.equal(2 * WEEK);
    expect(parseDuration('1h30m')).to.equal(90 * MINUTE);
    expect(parseDuration('1w2d3h4m5s')).to.equal(WEEK + 2 * DAY + 3 * HOUR + 4 * MINUTE + 5 * SECOND);
    expect(parseDuration(' 90d ')).to.equal(90 * DAY);
    expect(parseDuration('999999w')).to.equal(999_999 * WEEK);
  });

  it('units out of order, repeated, fractions, signs, spaces, upper case, bare numbers and words are refused', () => {
    for (const bad of ['', ' ', '30m1h', '1h1h', '1d1w', '1.5h', '.5d', '-1d', '+1d', '1 h', '1h 30m', '1H', '1D', '90', '3600', '1y', '1ms', '2 weeks', 'soon', 'h', '1000000d']) {
      expect(refused(() => parseDuration(bad)), bad).to.match(/^Use a duration: whole numbers with units w, d, h, m, s, largest first, each once/);
    }
  });

  it('zero: refused unless the option allows it, and then the message does not offer it; allowed, 0 and 0s etc. are zero', () => {
    for (const zero of ['0s', '0d', '0h0m', '000m']) {
      const message = refused(() => parseDuration(zero));
      expect(message, zero).to.equal('It must be more than zero, e.g. 90d, 12h, 1h30m.');
      expect(parseDuration(zero, { zero: true }), zero).to.equal(0);
    }
    expect(refused(() => parseDuration('0'))).not.to.match(/0 or/);
    expect(parseDuration('0', { zero: true })).to.equal(0);
    expect(refused(() => parseDuration('x', { zero: true }))).to.match(/^Use 0 or a duration/);
  });

  it('bounds are the option\'s own, written in the grammar', () => {
    const rule = { min: { ms: HOUR, text: '1h' }, max: { ms: 730 * DAY, text: '730d' } };
    expect(parseDuration('1h', rule)).to.equal(HOUR);
    expect(parseDuration('104w2d', rule)).to.equal(730 * DAY);
    expect(refused(() => parseDuration('59m', rule))).to.equal('It must be at least 1h.');
    expect(refused(() => parseDuration('104w3d', rule))).to.equal('It must be at most 730d.');
  });
});

describe('cos-admin option values: timestamps', () => {
  it('a date is that day at 00:00 UTC', () => {
    expect(parseTimestamp('2027-01-01').toISOString()).to.equal('2027-01-01T00:00:00.000Z');
    expect(parseTimestamp('2028-02-29').toISOString()).to.equal('2028-02-29T00:00:00.000Z');
  });

  it('an RFC 3339 time with Z or an offset, fractions allowed', () => {
    expect(parseTimestamp('2027-01-01T09:30:00Z').toISOString()).to.equal('2027-01-01T09:30:00.000Z');
    expect(parseTimestamp('2027-01-01T10:30:00+01:00').toISOString()).to.equal('2027-01-01T09:30:00.000Z');
    expect(parseTimestamp('2027-01-01t09:30:00.123z').toISOString()).to.equal('2027-01-01T09:30:00.123Z');
  });

  it('words, times without an offset, impossible days and times are refused', () => {
    for (const bad of ['tomorrow', 'now', '', '2027-01-01T10:00:00', '2027-01-01 10:00:00Z', '2027-1-1', '2027-02-29', '2027-13-01', '2027-01-32', '2027-01-01T24:00:00Z', '2027-01-01T10:60:00Z', '1767225600']) {
      expect(refused(() => parseTimestamp(bad)), bad).to.match(/(Use|No such day or time; use) a date \(2027-01-01 = that day 00:00 UTC\) or an RFC 3339 time/);
    }
  });
});

describe('cos-admin option values: page size and NACE section', () => {
  it('C-5: --limit is a whole number from 1 to 100', () => {
    expect(pageSize('1')).to.equal('1');
    expect(pageSize('100')).to.equal('100');
    expect(pageSize('007')).to.equal('7');
    for (const bad of ['0', '101', 'abc', '1.5', '-1', '', '1e2']) expect(refused(() => pageSize(bad)), bad).to.equal('Use a whole number from 1 to 100.');
  });

  it('C-24: --section is A..U in any case, or none', () => {
    expect(naceSection('j')).to.equal('J');
    expect(naceSection('NONE')).to.equal('none');
    for (const bad of ['Z', 'V', 'AB', '', 'nothing']) expect(refused(() => naceSection(bad)), bad).to.equal('Use a NACE Rev. 2 section letter A to U, or none.');
  });
});
