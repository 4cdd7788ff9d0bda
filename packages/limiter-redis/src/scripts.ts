/**
 * The Lua scripts the adapter sends (EVALSHA, falling back to EVAL on NOSCRIPT): the rate counter's
 * hit and the credential freshness's check, begin and end of a change.
 */
import { defineScript, type CommandParser, type RedisArgument } from 'redis';

/**
 * defineScript with its result's type spelled here: node-redis does not export the type it adds
 * (the SHA1), and the scripts are exported to the connections that register them.
 */
function script<S extends Parameters<typeof defineScript>[0]>(config: S): S & { readonly SHA1: string } {
  return defineScript(config);
}

/**
 * The only Redis command the counter sends: INCRBY the window's key by the hits it carries (ARGV[3],
 * default 1) and, on the first hits of the window (count == n), give it a TTL in milliseconds. One atomic script, so a key never lives
 * without its TTL. Defined with `defineScript`, the client sends EVALSHA and falls back to EVAL
 * when Redis answers NOSCRIPT (after a restart or SCRIPT FLUSH), which also re-caches it.
 *
 * The caller's deadline (ARGV[2], absolute epoch ms on Redis's clock) travels with the call: a hit
 * that reaches Redis after its caller stopped waiting (a frozen Redis wakes up to a queue of them)
 * counts nothing and returns -1. Fail-open requests are thereby "allowed without being counted"
 * (operations.md), instead of filling the window once Redis answers again.
 */
export const EXPIRED = -1;
const HIT_SCRIPT = script({
  SCRIPT: [
    "local now = redis.call('TIME')",
    // At the deadline's own millisecond the caller's timer may already have fired (a thaw right after
    // it was served in that millisecond and counted a failed-open hit): that is late too.
    'if tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) >= tonumber(ARGV[2]) then return -1 end',
    "local n = tonumber(ARGV[3]) or 1",
    "local count = redis.call('INCRBY', KEYS[1], n)",
    "if count == n then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end",
    'return count',
  ].join('\n'),
  NUMBER_OF_KEYS: 1,
  parseCommand(parser: CommandParser, key: RedisArgument, ttlMs: number, deadlineMs: number, n: number) {
    parser.pushKey(key);
    parser.push(String(ttlMs));
    parser.push(String(deadlineMs));
    parser.push(String(n));
  },
  // The script returns a Redis integer; the client maps it to a JavaScript number.
  transformReply: (reply: unknown): number => Number(reply),
});

/**
 * Credential freshness (the CredentialFreshness port), under the key names the core gives
 * (counter-keys.ts), behind the prefix. Per organisation, next to its counters (same hash tag):
 * `<prefix>:{org:<id>}:cc:token` (the current token, random, never reused) and
 * `<prefix>:{org:<id>}:cc:changes` (a sorted set of changes in progress, scored by their expiry on
 * Redis's clock). Per hash slot of the organisation's tag (so a cluster keeps them on the
 * organisation's node, and a resharding moves them with it): `<prefix>:{<slot tag>}:cc:alive`
 * (absent: the slot's data is gone, or was never there) and `<prefix>:{<slot tag>}:cc:unsettled`
 * (set for the change bound when `alive` was found missing: markers of changes in flight may have
 * been lost with it). Nothing is global: every script touches one slot. Every script starts with
 * that check, so a FLUSHALL, a restart without persistence or a slot served by a node that never
 * held its data is noticed by the first call after it.
 */
export const NOT_COUNTED = -2;
const ALIVE_CHECK = [
  'if redis.call(\'EXISTS\', KEYS[4]) == 0 then',
  "  redis.call('SET', KEYS[4], '1')",
  "  redis.call('SET', KEYS[5], '1', 'PX', ARGV[6])",
  'end',
];
/** count, token, settled, fresh (then, from GUARDED_CHECK_SCRIPT when it counted, each key counter's count); or -1 when late. */
export type CheckReply = readonly [number, string, number, number, ...number[]] | number;
const REDIS_NOW = ["local now = redis.call('TIME')", 'now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)'];
/** A freshness script: five keys and six or seven arguments, as the caller lists them. */
function freshnessScript<R>(lines: readonly string[], transformReply: (reply: unknown) => R) {
  return script({
    SCRIPT: lines.join('\n'),
    NUMBER_OF_KEYS: 5,
    parseCommand(parser: CommandParser, keys: readonly RedisArgument[], args: readonly RedisArgument[]) {
      for (const k of keys) parser.pushKey(k);
      for (const a of args) parser.push(a);
    },
    transformReply,
  });
}
/** A check's reads: the deadline, the slot's data, the token, settled and fresh; `count` not counted yet. */
const CHECK_HEAD = [
  ...REDIS_NOW,
  'if now >= tonumber(ARGV[2]) then return -1 end',
  ...ALIVE_CHECK,
  "local token = redis.call('GET', KEYS[2])",
  "if not token then token = ARGV[5]; redis.call('SET', KEYS[2], token) end",
  "local settled = redis.call('EXISTS', KEYS[5]) == 0 and redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') == 0",
  'local fresh = settled and token == ARGV[3]',
  `local count = ${NOT_COUNTED}`,
];
const CHECK_SCRIPT = freshnessScript(
  // KEYS: counter, token, changes, alive, unsettled. ARGV: ttlMs, deadlineMs, tag, mode (a|f|n), new token, bound, hits.
  [
    ...CHECK_HEAD,
    "if ARGV[4] == 'a' or (ARGV[4] == 'f' and fresh) then",
    "  local n = tonumber(ARGV[7]) or 1",
    "  count = redis.call('INCRBY', KEYS[1], n)",
    "  if count == n then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end",
    'end',
    'return {count, token, settled and 1 or 0, fresh and 1 or 0}',
  ],
  (reply: unknown): CheckReply => reply as CheckReply,
);
/**
 * A script whose keys are as many as the caller gives (the key windows of C-292): node-redis writes
 * their number before them (no NUMBER_OF_KEYS). The first key routes it in a cluster; every key
 * shares its hash tag.
 */
function variadicScript<R>(lines: readonly string[], transformReply: (reply: unknown) => R) {
  return script({
    SCRIPT: lines.join('\n'),
    parseCommand(parser: CommandParser, keys: readonly RedisArgument[], args: readonly RedisArgument[]) {
      parser.pushKeysLength([...keys]);
      for (const a of args) parser.push(a);
    },
    transformReply,
  });
}
/**
 * The key windows of C-292, counted before the organisation's counter (KEYS[counter]) in the same
 * script: KEYS[k] for k ≥ `first` is a key's counter, ARGV[2k - shift] the number of the call's
 * requests with that key and ARGV[2k - shift + 1] its limit. Each key counter is counted by its
 * requests; of those, only the ones that found it under its limit are added to the organisation's
 * counter (the others were refused by their key and do not use the organisation's window). Leaves
 * `count` (the organisation's count after the step; its current count when nothing was added) and
 * `keyCounts` (each key counter's count after the step).
 */
function guardedCount(counter: number, first: number, shift: number, hits: string): string[] {
  return [
    `local inc = tonumber(${hits}) or 1`,
    `for k = ${first}, #KEYS do`,
    `  local m = tonumber(ARGV[2 * k - ${shift}])`,
    "  local c = redis.call('INCRBY', KEYS[k], m)",
    "  if c == m then redis.call('PEXPIRE', KEYS[k], ARGV[1]) end",
    `  local admitted = tonumber(ARGV[2 * k - ${shift - 1}]) - (c - m)`,
    '  if admitted < 0 then admitted = 0 elseif admitted > m then admitted = m end',
    '  inc = inc - m + admitted',
    '  keyCounts[#keyCounts + 1] = c',
    'end',
    'if inc > 0 then',
    `  count = redis.call('INCRBY', KEYS[${counter}], inc)`,
    `  if count == inc then redis.call('PEXPIRE', KEYS[${counter}], ARGV[1]) end`,
    'else',
    `  count = tonumber(redis.call('GET', KEYS[${counter}]) or '0')`,
    'end',
  ];
}
/**
 * CHECK_SCRIPT with key windows (C-292): the same five keys and seven arguments, then KEYS[6..]
 * the key counters and per key ARGV[2k - 4] its requests and ARGV[2k - 3] its limit (k = 6: ARGV[8],
 * ARGV[9]). Answers CHECK_SCRIPT's four values, then, when it counted, each key counter's count.
 * Used only for a call with at least one key window: a call without keeps CHECK_SCRIPT.
 */
const GUARDED_CHECK_SCRIPT = variadicScript(
  [
    ...CHECK_HEAD,
    'local keyCounts = {}',
    "if ARGV[4] == 'a' or (ARGV[4] == 'f' and fresh) then",
    ...guardedCount(1, 6, 4, 'ARGV[7]').map((line) => `  ${line}`),
    'end',
    'local reply = {count, token, settled and 1 or 0, fresh and 1 or 0}',
    'for i = 1, #keyCounts do reply[4 + i] = keyCounts[i] end',
    'return reply',
  ],
  (reply: unknown): CheckReply => reply as CheckReply,
);
/**
 * HIT_SCRIPT with key windows (C-292): KEYS[1] the organisation's counter, KEYS[2..] the key
 * counters; ARGV ttlMs, deadlineMs, hits (all of the call's requests), then per key ARGV[2k] its
 * requests and ARGV[2k + 1] its limit (k = 2: ARGV[4], ARGV[5]). Answers -1 after the deadline, else
 * the organisation's count and each key counter's.
 */
const GUARDED_HIT_SCRIPT = variadicScript(
  [
    "local now = redis.call('TIME')",
    'if tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) >= tonumber(ARGV[2]) then return -1 end',
    'local count',
    'local keyCounts = {}',
    ...guardedCount(1, 2, 0, 'ARGV[3]'),
    'local reply = {count}',
    'for i = 1, #keyCounts do reply[1 + i] = keyCounts[i] end',
    'return reply',
  ],
  (reply: unknown): readonly number[] | number => (Array.isArray(reply) ? reply.map(Number) : Number(reply)),
);
const BEGIN_SCRIPT = freshnessScript(
  // KEYS: token, changes, (unused), alive, unsettled. ARGV: change id, new token, (unused), (unused), (unused), bound.
  [
    ...REDIS_NOW,
    ...ALIVE_CHECK,
    "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)",
    "redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), ARGV[1])",
    "redis.call('PEXPIRE', KEYS[2], ARGV[6])",
    "redis.call('SET', KEYS[1], ARGV[2])",
    'return 1',
  ],
  Number,
);
// Same keys and arguments as BEGIN_SCRIPT.
const END_SCRIPT = freshnessScript([...ALIVE_CHECK, "redis.call('SET', KEYS[1], ARGV[2])", "redis.call('ZREM', KEYS[2], ARGV[1])", 'return 1'], Number);
export const MODE = { always: 'a', 'if-fresh': 'f', never: 'n' } as const;

/** SHA1 of each credential-freshness script (EVALSHA; what Redis's INFO commandstats and SLOWLOG show). */
export const FRESHNESS_SCRIPT_SHA1 = Object.freeze({ check: CHECK_SCRIPT.SHA1, beginChange: BEGIN_SCRIPT.SHA1, endChange: END_SCRIPT.SHA1 });

/** Every script, as the client registers them (a cluster routes each by its first key). */
export const SCRIPTS = {
  hit: HIT_SCRIPT,
  freshness: CHECK_SCRIPT,
  guardedHit: GUARDED_HIT_SCRIPT,
  guardedFreshness: GUARDED_CHECK_SCRIPT,
  beginChange: BEGIN_SCRIPT,
  endChange: END_SCRIPT,
};
