import type Koa from 'koa';
import { addressAllowed, parseCidr } from '@cos/core';

/** The client address: it keys the per-source rate scope (C-50) and is checked against a key's networks (C-263). */
export type SourceAddress = (ctx: Koa.Context) => string;

/** An X-Forwarded-For hop as an address: `203.0.113.9:4711` and `[2001:db8::1]:443` lose their port. */
function hopAddress(hop: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(hop);
  if (bracketed !== null) return bracketed[1]!;
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(hop);
  return v4WithPort !== null ? v4WithPort[1]! : hop;
}

/**
 * The source address of a request (C-266):
 * - the application does not trust proxies (Koa's `app.proxy` false: createKoaApp's `trustProxy`, or a
 *   host app's own setting under createV1Router): the socket's peer address; X-Forwarded-For is ignored;
 * - it does, without `trustedProxies`: the peer is taken to be the one proxy in front, so the
 *   rightmost X-Forwarded-For hop (the address that proxy appended) is the client; hops to its left
 *   were written by the client and are not believed;
 * - it does, with `trustedProxies` (CIDRs): starting from the peer, each address inside one of them
 *   is a proxy whose X-Forwarded-For hop is believed, taken rightmost first; the first address
 *   outside them is the client. A peer outside them is the client itself, whatever the header says.
 * Every address here is an IP address, or 'unknown' when Node has none (a closed socket).
 */
export function createSourceAddress(trustedProxies?: readonly string[]): SourceAddress {
  let trusted: { readonly allowedCidrs: readonly string[] } | null = null;
  if (trustedProxies !== undefined) {
    const cidrs = trustedProxies.map((text) => {
      const parsed = parseCidr(text);
      if (!parsed.ok) throw new TypeError(`HttpOptions.trustedProxies: ${text} ${parsed.issue}`);
      return parsed.cidr;
    });
    trusted = { allowedCidrs: cidrs };
  }
  return (ctx) => {
    const peer = ctx.req.socket.remoteAddress ?? '';
    const header = ctx.app.proxy ? ctx.req.headers[ctx.app.proxyIpHeader.toLowerCase()] : undefined;
    if (header === undefined) return peer || 'unknown';
    const hops = (Array.isArray(header) ? header.join(',') : header).split(',');
    if (trusted === null) return hopAddress(hops[hops.length - 1]!.trim()) || peer || 'unknown';
    let address = peer;
    for (let i = hops.length - 1; i >= 0 && addressAllowed(trusted, address); i -= 1) address = hopAddress(hops[i]!.trim());
    return address || 'unknown';
  };
}
