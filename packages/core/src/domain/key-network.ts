/**
 * Per-key network restrictions (C-262..C-265): a key's `allowedCidrs` is null (any address) or a
 * list of at most MAX_ALLOWED_CIDRS IPv4 or IPv6 networks in canonical form. A CIDR is written
 * `address/prefix` (a bare address is a single host: /32 or /128); its host bits must be zero, so
 * `10.0.0.1/8` is refused rather than widened to `10.0.0.0/8`. Canonical form: IPv4 dotted
 * decimal, IPv6 as RFC 5952 writes it (lower case, the longest run of zero groups as `::`), and an
 * IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) as its IPv4 form (`10.0.0.0/8`). A request
 * address in IPv4-mapped IPv6 form (`::ffff:10.1.2.3`, as a dual-stack socket reports it) is matched
 * by its IPv4 form.
 *
 * Matching runs on every request of a restricted key, so each distinct list is compiled once into
 * a node:net BlockList, kept beside the list itself (a WeakMap keyed by the array): a credential
 * cache entry holds its key record, so its compiled list lives exactly as long as the entry.
 */
import { BlockList, isIP } from 'node:net';

export const MAX_ALLOWED_CIDRS = 20;

/** One network, parsed: its family, prefix length and network bits. */
interface Network {
  readonly family: 4 | 6;
  readonly prefix: number;
  readonly bits: bigint;
}

/** Why a CIDR is refused, or its canonical text. */
export type CidrParse = { readonly ok: true; readonly cidr: string } | { readonly ok: false; readonly issue: string };

export const ISSUE_CIDR = 'must be an IPv4 or IPv6 network in CIDR notation, e.g. 203.0.113.0/24 or 2001:db8::/32';

const MAPPED_PREFIX = 0xffffn << 32n;

function ipv4Bits(address: string): bigint {
  return address.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function ipv4Text(bits: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((bits >> shift) & 0xffn)).join('.');
}

/** 128 bits of a canonical (hex-only) IPv6 address. */
function ipv6Bits(canonical: string): bigint {
  const [head = '', tail] = canonical.split('::') as [string, string | undefined];
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? [] : new Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].reduce((acc, group) => (acc << 16n) | BigInt(parseInt(group, 16)), 0n);
}

function ipv6Text(bits: bigint): string {
  const groups: string[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) groups.push(((bits >> shift) & 0xffffn).toString(16));
  return new URL(`http://[${groups.join(':')}]`).hostname.slice(1, -1);
}

/** An IPv6 address text in canonical form (hex only), or null when the URL parser refuses it. */
function canonicalIpv6(address: string): string | null {
  try {
    return new URL(`http://[${address}]`).hostname.slice(1, -1);
  } catch {
    return null;
  }
}

function parseNetwork(text: string): Network | { issue: string } {
  const slash = text.indexOf('/');
  const address = slash === -1 ? text : text.slice(0, slash);
  const found = isIP(address);
  if (found === 0) return { issue: ISSUE_CIDR };
  const family: 4 | 6 = found === 4 ? 4 : 6;
  const width = family === 4 ? 32 : 128;
  let prefix = width;
  if (slash !== -1) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p) || Number(p) > width) return { issue: ISSUE_CIDR };
    prefix = Number(p);
  }
  let bits: bigint;
  if (family === 4) {
    bits = ipv4Bits(address);
  } else {
    const canonical = canonicalIpv6(address);
    if (canonical === null) return { issue: ISSUE_CIDR };
    bits = ipv6Bits(canonical);
  }
  const hostMask = (1n << BigInt(width - prefix)) - 1n;
  if ((bits & hostMask) !== 0n) {
    const network = bits & ~hostMask;
    const shown = family === 4 ? ipv4Text(network) : ipv6Text(network);
    return { issue: `has host bits set: the network is ${shown}/${prefix}` };
  }
  // An IPv4-mapped IPv6 network is the IPv4 network it maps.
  if (family === 6 && prefix >= 96 && bits >> 32n === 0xffffn) return { family: 4, prefix: prefix - 96, bits: bits & ~MAPPED_PREFIX };
  return { family, prefix, bits };
}

function networkText(n: Network): string {
  return `${n.family === 4 ? ipv4Text(n.bits) : ipv6Text(n.bits)}/${n.prefix}`;
}

/** The canonical text of a CIDR, or why it is refused (not a network; host bits set). */
export function parseCidr(text: string): CidrParse {
  const n = parseNetwork(text.trim());
  return 'issue' in n ? { ok: false, issue: n.issue } : { ok: true, cidr: networkText(n) };
}

/** Canonical CIDRs without duplicates, in the order first given (the input must already be canonical). */
export function uniqueCidrs(cidrs: readonly string[]): string[] {
  return [...new Set(cidrs)];
}

function parsedCanonical(cidr: string): Network {
  const n = parseNetwork(cidr);
  if ('issue' in n) throw new TypeError(`not a canonical CIDR: ${cidr}`);
  return n;
}

/** True when `inner` lies inside `outer` (same family, at least as long a prefix, same leading bits). */
function contains(outer: Network, inner: Network): boolean {
  if (outer.family !== inner.family || inner.prefix < outer.prefix) return false;
  const width = outer.family === 4 ? 32n : 128n;
  const shift = width - BigInt(outer.prefix);
  return inner.bits >> shift === outer.bits >> shift;
}

/**
 * True when a key restricted to `inner` is no wider than one restricted to `outer` (null: any
 * address): every network of `inner` lies inside a network of `outer`.
 */
export function cidrsWithin(inner: readonly string[] | null, outer: readonly string[] | null): boolean {
  if (outer === null) return true;
  if (inner === null) return false;
  const outers = outer.map(parsedCanonical);
  return inner.every((c) => {
    const n = parsedCanonical(c);
    return outers.some((o) => contains(o, n));
  });
}

const compiled = new WeakMap<readonly string[], BlockList>();

function blockListOf(cidrs: readonly string[]): BlockList {
  let list = compiled.get(cidrs);
  if (list === undefined) {
    list = new BlockList();
    for (const cidr of cidrs) {
      const n = parsedCanonical(cidr);
      const slash = cidr.lastIndexOf('/');
      list.addSubnet(cidr.slice(0, slash), n.prefix, n.family === 4 ? 'ipv4' : 'ipv6');
    }
    compiled.set(cidrs, list);
  }
  return list;
}

/** `::ffff:a.b.c.d` (and its hex spelling) as `a.b.c.d`; any other address unchanged. */
function unmapped(address: string): { address: string; family: 'ipv4' | 'ipv6' } | null {
  const family = isIP(address);
  if (family === 4) return { address, family: 'ipv4' };
  if (family !== 6) return null;
  const lower = address.toLowerCase();
  if (lower.startsWith('::ffff:')) {
    const canonical = canonicalIpv6(lower);
    if (canonical !== null) {
      const bits = ipv6Bits(canonical);
      if (bits >> 32n === 0xffffn) return { address: ipv4Text(bits & 0xffffffffn), family: 'ipv4' };
    }
  }
  return { address, family: 'ipv6' };
}

/**
 * Whether a request from `address` may use a key with `allowedCidrs` (C-263): always for an
 * unrestricted key (null or absent); for a restricted one, only an IP address inside one of its
 * networks (anything that is not an address, such as 'unknown', never is).
 */
export function addressAllowed(key: { readonly allowedCidrs?: readonly string[] | null }, address: string): boolean {
  const cidrs = key.allowedCidrs;
  if (cidrs === undefined || cidrs === null) return true;
  const a = unmapped(address);
  if (a === null) return false;
  try {
    return blockListOf(cidrs).check(a.address, a.family);
  } catch {
    return false;
  }
}
