/**
 * The API listener: its address, how many connections it holds and how long a request may take to
 * arrive.
 */
import { host, int, orNull, variable } from './variable.js';

export const LISTENER_VARIABLES = {
  HOST: variable(
    'host',
    '127.0.0.1',
    'listen address; `0.0.0.0` to accept connections from other machines',
    host('HOST'),
  ),
  PORT: variable('port', '3000', 'listen port; `0` takes any free port (the start-up line says which)', int('PORT', 0, 65535).default(3000)),
  MAX_CONNECTIONS: variable(
    'maxConnections',
    'unset',
    "connections the API listener holds at once; unset: the process's soft descriptor limit (`ulimit -n`) less a reserve of a quarter of it, 32 to 256 (768 at 1024). At the cap a new connection closes the least recently active idle one, or one still sending a request body (unauthenticated ones first); a connection whose request has fully arrived is never closed for it (operations guide, section 10)",
    int('MAX_CONNECTIONS', 1, 1_000_000).optional().transform(orNull),
  ),
  HEADERS_TIMEOUT_MS: variable(
    'headersTimeoutMs',
    '10000',
    "a request's header section must arrive within this (a silent or slow connection is answered 408 and closed); at most `REQUEST_TIMEOUT_MS`",
    int('HEADERS_TIMEOUT_MS', 100, 600_000).default(10_000),
  ),
  REQUEST_TIMEOUT_MS: variable(
    'requestTimeoutMs',
    '30000',
    'a whole request, body included, must arrive within this (a trickled body is answered 408 and closed); the handling time after it is not counted',
    int('REQUEST_TIMEOUT_MS', 100, 3_600_000).default(30_000),
  ),
};
