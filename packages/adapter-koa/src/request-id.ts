/**
 * C-15: every response carries `X-Request-Id`. A caller-supplied value of 1..128 visible ASCII
 * characters (0x21..0x7E) is echoed; anything else (absent, empty, too long, spaces, control or
 * non-ASCII characters, several headers joined by Node) is replaced by a new UUID.
 */
import { randomUUID } from 'node:crypto';

export const REQUEST_ID_HEADER = 'X-Request-Id';
const VALID_REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

export function requestIdFor(supplied: string | string[] | undefined): string {
  return typeof supplied === 'string' && VALID_REQUEST_ID.test(supplied) ? supplied : randomUUID();
}
