/**
 * Per-key networks (C-262..C-264) and the bodies of an editable key (C-260, C-261): CIDR parsing and
 * normalisation, address matching with IPv4-mapped addresses, the subset rule, and the validation of
 * `metadata`, `allowed_cidrs` and the PATCH body, fuzzed.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import {
  addressAllowed,
  checkPatchKey,
  cidrsWithin,
  ISSUE_CIDR,
  ISSUE_IMMUTABLE_KEY_FIELD,
  ISSUE_SOURCE_ADDRESS,
  networkRefusal,
  parseCidr,
  validateIssueKey,
  ValidationError,
  type Checked,
} from '@cos/core';

const NOW = new Date('2026-06-10T12:00:00Z');

function details<T>(checked: Checked<T>): readonly { field: string; issue: string }[] {
  return checked.ok ? [] : checked.details;
}

function issueDetails(body: Record<string, unknown>): { field: string; issue: string }[] {
  try {
    validateIssueKey(body, NOW);
  } catch (e) {
    if (e instanceof ValidationError) return [...e.details];
    throw e;
  }
  return [];
}

describe('key networks: CIDRs (C-262)', () => {
  it('C-262: normalises IPv4 and IPv6 networks; a bare address is one host; IPv4-mapped networks become IPv4', () => {
    const cases: Array<[string, string]> = [
      ['10.0.0.0/8', '10.0.0.0/8'],
      [' 203.0.113.7 ', '203.0.113.7/32'],
      ['0.0.0.0/0', '0.0.0.0/0'],
      ['2001:DB8:0:0::/32', '2001:db8::/32'],
      ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1/128'],
      ['::/0', '::/0'],
      ['::ffff:10.0.0.0/104', '10.0.0.0/8'],
      ['::ffff:192.0.2.1', '192.0.2.1/32'],
      ['fe80::/10', 'fe80::/10'],
    ];
    for (const [input, canonical] of cases) expect(parseCidr(input), input).to.deep.equal({ ok: true, cidr: canonical });
  });

  it('C-262: a network with host bits set is refused with its network named, never widened', () => {
    expect(parseCidr('10.0.0.1/8')).to.deep.equal({ ok: false, issue: 'has host bits set: the network is 10.0.0.0/8' });
    expect(parseCidr('2001:db8::1/32')).to.deep.equal({ ok: false, issue: 'has host bits set: the network is 2001:db8::/32' });
    expect(parseCidr('192.168.1.128/24')).to.deep.equal({ ok: false, issue: 'has host bits set: the network is 192.168.1.0/24' });
  });

  it('C-262: anything that is not an address with an optional prefix in range is refused', () => {
    for (const bad of ['', '/8', '10.0.0.0/', '10.0.0.0/33', '10.0.0.0/-1', '10.0.0.0/08x', '010.0.0.0/8', '10.0.0/8', 'example.com/24', '::/129', 'fe80::1%eth0/128', '10.0.0.0/8/8', '1.2.3.4 /32']) {
      expect(parseCidr(bad), bad).to.deep.equal({ ok: false, issue: ISSUE_CIDR });
    }
  });

  it('C-263: an address matches its networks; IPv4-mapped IPv6 addresses match their IPv4 form; anything else never does', () => {
    const key = { allowedCidrs: ['10.0.0.0/8', '2001:db8::/32', '192.0.2.7/32'] };
    for (const inside of ['10.1.2.3', '::ffff:10.1.2.3', '::FFFF:a01:203', '2001:db8::42', '2001:DB8:ffff::1', '192.0.2.7', '::ffff:192.0.2.7']) {
      expect(addressAllowed(key, inside), inside).to.equal(true);
    }
    for (const outside of ['11.0.0.1', '::ffff:11.0.0.1', '2001:db9::1', '192.0.2.8', '::1', '127.0.0.1', 'unknown', '', 'fe80::1%eth0', '10.0.0.1:80']) {
      expect(addressAllowed(key, outside), outside).to.equal(false);
    }
    expect(addressAllowed({ allowedCidrs: null }, 'unknown'), 'unrestricted').to.equal(true);
    expect(addressAllowed({}, '203.0.113.1'), 'no networks named').to.equal(true);
  });

  it('C-263: networkRefusal is the 403 with the source_address detail, and asks for the address only for a restricted key', () => {
    let asked = 0;
    const address = (a: string) => () => (asked++, a);
    expect(networkRefusal({ allowedCidrs: null }, address('1.2.3.4'))).to.equal(null);
    expect(asked).to.equal(0);
    expect(networkRefusal({ allowedCidrs: ['1.2.3.0/24'] }, address('1.2.3.4'))).to.equal(null);
    const refusal = networkRefusal({ allowedCidrs: ['1.2.3.0/24'] }, address('1.2.4.4'));
    expect(refusal?.code).to.equal('FORBIDDEN');
    expect(refusal?.details).to.deep.equal([{ field: 'source_address', issue: ISSUE_SOURCE_ADDRESS }]);
    expect(asked).to.equal(2);
  });

  it('C-264: a set lies within another when each of its networks lies inside one of the other\'s; null is any address', () => {
    expect(cidrsWithin(['10.1.0.0/16', '10.2.3.4/32'], ['10.0.0.0/8'])).to.equal(true);
    expect(cidrsWithin(['10.0.0.0/8'], ['10.0.0.0/8', '192.0.2.0/24'])).to.equal(true);
    expect(cidrsWithin(['10.0.0.0/7'], ['10.0.0.0/8'])).to.equal(false);
    expect(cidrsWithin(['11.0.0.0/8'], ['10.0.0.0/8'])).to.equal(false);
    expect(cidrsWithin(['2001:db8:1::/48'], ['2001:db8::/32'])).to.equal(true);
    expect(cidrsWithin(['2001:db8::/32'], ['10.0.0.0/8']), 'another family').to.equal(false);
    expect(cidrsWithin(null, ['10.0.0.0/8']), 'any address is wider').to.equal(false);
    expect(cidrsWithin(null, null)).to.equal(true);
    expect(cidrsWithin(['0.0.0.0/0'], null)).to.equal(true);
  });

  it('C-264: property: a network inside another (a longer prefix over the same leading bits) is within it, a shorter one never', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 32 }), fc.integer({ min: 0, max: 32 }), (bits, a, b) => {
        const [outer, inner] = a <= b ? [a, b] : [b, a];
        const net = (prefix: number) => {
          const masked = prefix === 0 ? 0 : (bits & (0xffffffff << (32 - prefix))) >>> 0;
          return `${[24, 16, 8, 0].map((s) => (masked >>> s) & 0xff).join('.')}/${prefix}`;
        };
        expect(cidrsWithin([net(inner)], [net(outer)])).to.equal(true);
        if (inner !== outer) expect(cidrsWithin([net(outer)], [net(inner)])).to.equal(false);
      }),
      { numRuns: 300 },
    );
  });
});

describe('key bodies: metadata and allowed_cidrs (C-260, C-262)', () => {
  it('C-260: issue accepts metadata of string values and answers {} when none is given', () => {
    expect(validateIssueKey({ label: 'a' }, NOW).metadata).to.deep.equal({});
    expect(validateIssueKey({ label: 'a', metadata: { owner: 'team-a', 'ci.job_1-x': '' } }, NOW).metadata).to.deep.equal({ owner: 'team-a', 'ci.job_1-x': '' });
  });

  it('C-260: every offending entry is named by its path, with the other fields, at once', () => {
    const got = issueDetails({
      label: '',
      metadata: { owner: 3, 'bad name': 'x', ['n'.repeat(41)]: 'x', long: 'v'.repeat(501), ctl: 'a\u0000b', gone: null, fine: 'ok' },
    });
    expect(got.map((d) => d.field)).to.deep.equal(['label', 'metadata.owner', 'metadata.bad name', `metadata.${'n'.repeat(41)}`, 'metadata.long', 'metadata.ctl', 'metadata.gone']);
    expect(issueDetails({ label: 'a', metadata: 'x' }).map((d) => d.field)).to.deep.equal(['metadata']);
    expect(issueDetails({ label: 'a', metadata: ['x'] }).map((d) => d.field)).to.deep.equal(['metadata']);
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v']));
    expect(issueDetails({ label: 'a', metadata: many })).to.deep.equal([{ field: 'metadata', issue: 'must hold at most 20 entries' }]);
    expect(validateIssueKey({ label: 'a', metadata: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, 'v'.repeat(500)])) }, NOW).metadata).to.have.property('k19');
  });

  it('C-262: allowed_cidrs: normalised, duplicates once, null for any address; bad entries named by index', () => {
    expect(validateIssueKey({ label: 'a', allowed_cidrs: ['10.0.0.0/8', '10.0.0.0/8 ', '2001:DB8::/32'] }, NOW).allowedCidrs).to.deep.equal(['10.0.0.0/8', '2001:db8::/32']);
    expect(validateIssueKey({ label: 'a', allowed_cidrs: null }, NOW).allowedCidrs).to.equal(null);
    expect(validateIssueKey({ label: 'a' }, NOW)).to.not.have.property('allowedCidrs');
    expect(issueDetails({ label: 'a', allowed_cidrs: ['10.0.0.0/8', '10.0.0.1/8', 7, 'x'] })).to.deep.equal([
      { field: 'allowed_cidrs.1', issue: 'has host bits set: the network is 10.0.0.0/8' },
      { field: 'allowed_cidrs.2', issue: ISSUE_CIDR },
      { field: 'allowed_cidrs.3', issue: ISSUE_CIDR },
    ]);
    for (const bad of [[], '10.0.0.0/8', {}, Array.from({ length: 21 }, (_, i) => `10.0.${i}.0/24`)]) {
      expect(issueDetails({ label: 'a', allowed_cidrs: bad }).map((d) => d.field), JSON.stringify(bad)).to.deep.equal(['allowed_cidrs']);
    }
  });

  it('C-261: PATCH takes label, metadata (null removes) and allowed_cidrs; scopes, environment and expires_at are refused by name', () => {
    expect(checkPatchKey({})).to.deep.equal({ ok: true, value: {} });
    expect(checkPatchKey({ label: ' x ', metadata: { a: '1', b: null }, allowed_cidrs: null })).to.deep.equal({
      ok: true,
      value: { label: 'x', metadata: { a: '1', b: null }, allowedCidrs: null },
    });
    expect(details(checkPatchKey({ scopes: ['audit:read'], environment: 'test', expires_at: null, label: 'ok' }))).to.deep.equal([
      { field: 'scopes', issue: ISSUE_IMMUTABLE_KEY_FIELD },
      { field: 'environment', issue: ISSUE_IMMUTABLE_KEY_FIELD },
      { field: 'expires_at', issue: ISSUE_IMMUTABLE_KEY_FIELD },
    ]);
    expect(details(checkPatchKey({ owner: 5, id: 'x' })).map((d) => d.issue)).to.deep.equal(['extra fields not permitted', 'extra fields not permitted']);
    // C-290: the key's own limit is editable, null removes it.
    expect(checkPatchKey({ rate_limit_per_minute: 5 })).to.deep.equal({ ok: true, value: { rateLimitPerMinute: 5 } });
    expect(checkPatchKey({ rate_limit_per_minute: null })).to.deep.equal({ ok: true, value: { rateLimitPerMinute: null } });
    expect(details(checkPatchKey({ metadata: { a: 1 }, label: '' })).map((d) => d.field)).to.deep.equal(['label', 'metadata.a']);
    // The entry count of a PATCH applies to the merged result (the use case), not to the body.
    expect(checkPatchKey({ metadata: Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`k${i}`, null])) }).ok).to.equal(true);
    expect(details(checkPatchKey('x'))).to.deep.equal([{ field: 'body', issue: 'must be a JSON object' }]);
  });

  it('C-11: random JSON into the PATCH body answers a check, never an exception', () => {
    const anyJson = fc.jsonValue({ maxDepth: 3 });
    const body = fc.oneof(anyJson, fc.dictionary(fc.constantFrom('label', 'metadata', 'allowed_cidrs', 'scopes', 'x'), anyJson));
    fc.assert(
      fc.property(body, (b) => {
        const checked = checkPatchKey(b);
        if (!checked.ok) {
          const fields = checked.details.map((d) => d.field);
          expect(new Set(fields).size).to.equal(fields.length);
        }
      }),
      { numRuns: 400 },
    );
  });
});
