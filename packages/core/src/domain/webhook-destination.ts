/**
 * Where a webhook may be delivered: never inside the service's own network. An endpoint must be an
 * `https://` URL (plain `http://` only when the policy allows it) whose host is neither an internal
 * name (`localhost`, `*.localhost`, `*.internal`, `*.local`, `*.home.arpa`, a single-label name)
 * nor an address in a special-purpose range: loopback, private (RFC 1918), shared (100.64/10),
 * link-local, unique-local, multicast, unspecified, broadcast, documentation, benchmarking and the
 * other IANA special-purpose blocks, and no IPv6 address outside global unicast (2000::/3). IPv6
 * forms that carry an IPv4 address (IPv4-mapped, IPv4-compatible, SIIT, NAT64 64:ff9b::/96, 6to4)
 * are judged by that IPv4 address.
 *
 * The same rules run when an endpoint is configured (literal hosts here, names through the
 * WebhookHostResolver port) and at every delivery on each address actually connected to (the
 * sender adapter). `allowPrivate` (development and tests) lets loopback, private, shared,
 * link-local and unique-local addresses and internal names through; multicast, broadcast,
 * unspecified and reserved addresses are never a destination.
 *
 * Range matching is node:net's BlockList; see docs/decisions/0003-webhook-destination-ranges.md.
 */
import { BlockList, isIP } from 'node:net';

/** What an operator allows beyond public https destinations. */
export interface WebhookDestinationPolicy {
  /** Plain `http://` endpoints (WEBHOOK_ALLOW_HTTP). */
  readonly allowHttp: boolean;
  /** Loopback, private, shared, link-local and unique-local addresses and internal names (WEBHOOK_ALLOW_PRIVATE). */
  readonly allowPrivate: boolean;
}

/** The default: public https endpoints only. */
export const STRICT_WEBHOOK_POLICY: WebhookDestinationPolicy = Object.freeze({ allowHttp: false, allowPrivate: false });

/** Why a destination is refused, and which policy switch would let it through (null: none). */
export interface DestinationRefusal {
  readonly reason: string;
  readonly allowedBy: keyof WebhookDestinationPolicy | null;
}

interface Range {
  readonly kind: string;
  /** Allowed with `allowPrivate`. */
  readonly internal: boolean;
  readonly list: BlockList;
}

function range(kind: string, internal: boolean, family: 'ipv4' | 'ipv6', subnets: readonly string[]): Range {
  const list = new BlockList();
  for (const subnet of subnets) {
    const [network, prefix] = subnet.split('/') as [string, string];
    list.addSubnet(network, Number(prefix), family);
  }
  return { kind, internal, list };
}

/** IPv4 special-purpose blocks (IANA registry), the most specific first. */
const IPV4_RANGES: readonly Range[] = [
  range('broadcast', false, 'ipv4', ['255.255.255.255/32']),
  range('unspecified', false, 'ipv4', ['0.0.0.0/8']),
  range('loopback', true, 'ipv4', ['127.0.0.0/8']),
  range('private', true, 'ipv4', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']),
  range('shared address space', true, 'ipv4', ['100.64.0.0/10']),
  range('link-local', true, 'ipv4', ['169.254.0.0/16']),
  range('multicast', false, 'ipv4', ['224.0.0.0/4']),
  range('documentation', false, 'ipv4', ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24']),
  range('benchmarking', false, 'ipv4', ['198.18.0.0/15']),
  range('reserved', false, 'ipv4', ['192.0.0.0/24', '192.88.99.0/24', '240.0.0.0/4']),
];

/** IPv6 blocks refused inside or outside global unicast (embedded IPv4 forms are handled first). */
const IPV6_RANGES: readonly Range[] = [
  range('unspecified', false, 'ipv6', ['::/128']),
  range('loopback', true, 'ipv6', ['::1/128']),
  range('link-local', true, 'ipv6', ['fe80::/10']),
  range('site-local', true, 'ipv6', ['fec0::/10']),
  range('unique-local', true, 'ipv6', ['fc00::/7']),
  range('multicast', false, 'ipv6', ['ff00::/8']),
  range('documentation', false, 'ipv6', ['2001:db8::/32', '3fff::/20']),
  range('reserved', false, 'ipv6', ['100::/64', '64:ff9b:1::/48', '2001::/23']),
];

const GLOBAL_UNICAST = range('global unicast', false, 'ipv6', ['2000::/3']).list;

/** The eight 16-bit groups of a valid IPv6 address (zone index dropped), or null. */
function ipv6Groups(address: string): number[] | null {
  let text = address.replace(/%.*$/, '');
  if (isIP(text) !== 6) return null;
  // A dotted IPv4 tail becomes two hex groups.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted !== null) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string | undefined): number[] => (part === undefined || part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const left = parse(head);
  const right = parse(tail);
  const groups = tail === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  return groups.length === 8 ? groups : null;
}

const dottedOf = (high: number, low: number): string => `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;

/** The IPv4 address an IPv6 address carries and the name of that form, or null. */
function embeddedIpv4(g: readonly number[]): { readonly v4: string; readonly form: string } | null {
  const zero = (from: number, to: number): boolean => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 5) && g[5] === 0xffff) return { v4: dottedOf(g[6]!, g[7]!), form: 'IPv4-mapped' };
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return { v4: dottedOf(g[6]!, g[7]!), form: 'IPv4-translated' };
  // ::/96 minus :: and ::1 (judged as IPv6 themselves).
  if (zero(0, 6) && (g[6] !== 0 || g[7]! > 1)) return { v4: dottedOf(g[6]!, g[7]!), form: 'IPv4-compatible' };
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return { v4: dottedOf(g[6]!, g[7]!), form: 'NAT64' };
  if (g[0] === 0x2002) return { v4: dottedOf(g[1]!, g[2]!), form: '6to4' };
  return null;
}

function ipv4Refusal(address: string): { kind: string; internal: boolean } | null {
  for (const r of IPV4_RANGES) if (r.list.check(address, 'ipv4')) return r;
  return null;
}

/**
 * Why an IP address (IPv4 or IPv6, as a resolver or the URL parser gives it) may not receive
 * webhooks under `policy`, or null when it may. Anything that is not an IP address is refused.
 * `host`: the name it was resolved from, named in the reason.
 */
export function addressRefusal(address: string, policy: WebhookDestinationPolicy = STRICT_WEBHOOK_POLICY, host?: string): DestinationRefusal | null {
  const bare = address.replace(/^\[(.*)\]$/, '$1');
  const of = host === undefined ? '' : ` of ${host}`;
  const refuse = (kind: string, internal: boolean): DestinationRefusal | null =>
    internal && policy.allowPrivate ? null : { reason: `address ${bare}${of} is not allowed (${kind})`, allowedBy: internal ? 'allowPrivate' : null };
  if (isIP(bare) === 4) {
    const r = ipv4Refusal(bare);
    return r === null ? null : refuse(r.kind, r.internal);
  }
  const groups = ipv6Groups(bare);
  if (groups === null) return { reason: `address ${bare} is not an IP address`, allowedBy: null };
  const embedded = embeddedIpv4(groups);
  if (embedded !== null) {
    const r = ipv4Refusal(embedded.v4);
    return r === null ? null : refuse(`${r.kind}: ${embedded.form} ${embedded.v4}`, r.internal);
  }
  const plain = bare.replace(/%.*$/, '');
  for (const r of IPV6_RANGES) if (r.list.check(plain, 'ipv6')) return refuse(r.kind, r.internal);
  if (!GLOBAL_UNICAST.check(plain, 'ipv6')) return refuse('not global unicast', false);
  return null;
}

/** Host names that only ever mean something inside a network: never a webhook receiver on the Internet. */
const INTERNAL_SUFFIXES = ['.localhost', '.internal', '.local', '.localdomain', '.home.arpa'];

/**
 * Why a URL's host (as WHATWG URL's `hostname` gives it: IPv4 normalised, IPv6 in brackets) may
 * not receive webhooks, or null when it may (a name may still resolve to a refused address: that
 * is checked on the resolved addresses).
 */
export function hostRefusal(hostname: string, policy: WebhookDestinationPolicy = STRICT_WEBHOOK_POLICY): DestinationRefusal | null {
  if (hostname.startsWith('[') || isIP(hostname) !== 0) return addressRefusal(hostname, policy);
  if (policy.allowPrivate) return null;
  const name = hostname.toLowerCase().replace(/\.+$/, '');
  if (name === 'localhost' || INTERNAL_SUFFIXES.some((s) => name.endsWith(s))) {
    return { reason: `host ${name} is an internal name`, allowedBy: 'allowPrivate' };
  }
  if (!name.includes('.')) return { reason: `host ${name} is a single-label (local network) name`, allowedBy: 'allowPrivate' };
  return null;
}

/**
 * Why a webhook URL may not be used under `policy` (its scheme, then its host), or null. The URL
 * must already be a valid absolute URL.
 */
export function urlRefusal(url: URL, policy: WebhookDestinationPolicy = STRICT_WEBHOOK_POLICY): DestinationRefusal | null {
  if (url.protocol === 'http:' && !policy.allowHttp) return { reason: 'http:// is not allowed, only https://', allowedBy: 'allowHttp' };
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { reason: `${url.protocol}// is not allowed, only https://`, allowedBy: null };
  return hostRefusal(url.hostname, policy);
}
