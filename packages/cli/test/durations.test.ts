/**
 * The duration options of `cos-admin key` (operations guide, "Issue", "Roll", "Find stale keys"):
 * `--expires-in` and `--unused-for` take a whole number with d, h or m; `--grace` takes 0 or a whole
 * number with d, h, m or s (the core then bounds it to 0..604800 s). The conversion is the `ms`
 * package's; these cases pin that every form `ms` takes beyond the documented ones stays a usage
 * error (exit status 2), so swapping the converter cannot widen what an operator may type.
 */
import { expect } from 'chai';
import { parseDuration, parseGrace } from '../src/commands/key.js';
import ms from 'ms';
import { CliError, EXIT_USAGE, failureOf } from '../src/errors.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

function usageError(call: () => unknown, option: string): void {
  let thrown: unknown;
  try {
    call();
  } catch (e) {
    thrown = e;
  }
  expect(thrown, 'a usage error').to.be.instanceOf(CliError);
  expect((thrown as CliError).usage).to.equal(true);
  expect(failureOf(thrown).exitCode).to.equal(EXIT_USAGE);
  expect((thrown as CliError).message).to.match(new RegExp(`^invalid ${option} "`));
}

/** Forms `ms` accepts that the CLI does not document: each stays a usage error. */
const WIDER_THAN_DOCUMENTED = ['1.5h', '.5d', '2 weeks', '1 week', '1w', '1y', '-1d', '-0', '1D', '12H', '1 d', '1day', '2 hours', '1ms', '3600'];

describe('cos-admin key: duration options (--expires-in, --unused-for, --grace)', () => {
  it('the premise: `ms` on its own takes every one of those wider forms', () => {
    for (const form of WIDER_THAN_DOCUMENTED) expect(ms(form as ms.StringValue), form).to.be.a('number').and.not.NaN;
  });

  it('--expires-in / --unused-for: a whole number of days, hours or minutes, in milliseconds', () => {
    expect(parseDuration('90d')).to.equal(90 * DAY);
    expect(parseDuration('12h')).to.equal(12 * HOUR);
    expect(parseDuration('30m')).to.equal(30 * MINUTE);
    expect(parseDuration('1m')).to.equal(MINUTE);
    expect(parseDuration(' 7d ', '--unused-for')).to.equal(7 * DAY);
    expect(parseDuration('999999d')).to.equal(999_999 * DAY);
  });

  it('--expires-in / --unused-for: zero, seconds, a bare number, more than six digits and every form beyond the documented ones are usage errors naming the option', () => {
    for (const bad of ['', ' ', '0d', '000m', '90s', '90', '3600000', '1000000d', '90y', 'soon', 'd', ...WIDER_THAN_DOCUMENTED]) {
      usageError(() => parseDuration(bad), '--expires-in');
      usageError(() => parseDuration(bad, '--unused-for'), '--unused-for');
    }
  });

  it('--grace: 0, or a whole number of days, hours, minutes or seconds, in seconds (the core bounds it)', () => {
    expect(parseGrace('0')).to.equal(0);
    expect(parseGrace('0s')).to.equal(0);
    expect(parseGrace('0d')).to.equal(0);
    expect(parseGrace('24h')).to.equal(86_400);
    expect(parseGrace('90m')).to.equal(5_400);
    expect(parseGrace('3600s')).to.equal(3_600);
    expect(parseGrace('7d')).to.equal(604_800);
    expect(parseGrace(' 1h ')).to.equal(3_600);
    // past 7 d the parse still succeeds: the core refuses it with its own message (C-23's bound)
    expect(parseGrace('8d')).to.equal(691_200);
  });

  it('--grace: a bare number other than 0 (not milliseconds, not seconds), more than seven digits and every form beyond the documented ones are usage errors', () => {
    for (const bad of ['', '00', '3600', '1', '24x', '10000000s', 'h', ...WIDER_THAN_DOCUMENTED]) usageError(() => parseGrace(bad), '--grace');
  });
});
